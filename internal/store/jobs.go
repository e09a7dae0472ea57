package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

const jobCols = `id, tier, kind, repo, installation_id, pr_number, head_sha, base_sha, config,
	required_labels, gpu_uuid, check_run_id, status, attempts, max_attempts, failure_reason,
	lease_id, lease_expires_at, agent_id, cancel_requested, created_at, started_at, finished_at, judged_at,
	priority, share_key, vtag, vcost, vweight, seq, pool`

func scanJob(sc scanner) (Job, error) { return scanJobWith(sc) }

// scanJobWith scans jobCols and then extra, columns selected after them.
func scanJobWith(sc scanner, extra ...any) (Job, error) {
	var (
		j                               Job
		labels                          string
		status                          string
		leaseExp, agent, created, start sql.NullInt64
		finish, judged                  sql.NullInt64
	)
	dest := []any{&j.ID, &j.Tier, &j.Kind, &j.Repo, &j.InstallationID, &j.PRNumber, &j.HeadSHA, &j.BaseSHA,
		&j.Config, &labels, &j.GPUUUID, &j.CheckRunID, &status, &j.Attempts, &j.MaxAttempts, &j.FailureReason,
		&j.LeaseID, &leaseExp, &agent, &j.CancelRequested, &created, &start, &finish, &judged,
		&j.Priority, &j.ShareKey, &j.VTag, &j.VCost, &j.VWeight, &j.Seq, &j.Pool}
	err := sc.Scan(append(dest, extra...)...)
	if err != nil {
		return Job{}, err
	}
	if j.Labels, err = parseList(labels); err != nil {
		return Job{}, fmt.Errorf("job %d: %w", j.ID, err)
	}
	j.Status = jobstate.Status(status)
	j.LeaseExpiresAt = fromMicros(leaseExp)
	j.AgentID = agent.Int64
	j.CreatedAt = fromMicros(created)
	j.StartedAt = fromMicros(start)
	j.FinishedAt = fromMicros(finish)
	j.JudgedAt = fromMicros(judged)
	return j, nil
}

func collectJobs(rows *sql.Rows) ([]Job, error) {
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Enqueue adds a queued job and wakes this process's long-polling claimers.
func (s *sqlStore) Enqueue(ctx context.Context, spec JobSpec) (Job, error) {
	var j Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = s.enqueueTx(ctx, tx, spec, s.nowMicros())
		return err
	})
	if err != nil {
		return Job{}, err
	}
	s.wake.broadcast()
	return j, nil
}

// enqueueTx inserts a queued job in transaction tx, in its place in the
// claim order (fleet.go). A caller wakes claimers after committing —
// ApplyCheck wakes them whatever it enqueued, which is harmless.
func (s *sqlStore) enqueueTx(ctx context.Context, tx txer, spec JobSpec, now int64) (Job, error) {
	if spec.Repo == "" || spec.Tier == "" {
		return Job{}, fmt.Errorf("enqueue: repo and tier are required")
	}
	if spec.MaxAttempts <= 0 {
		spec.MaxAttempts = DefaultMaxAttempts
	}
	pl, err := s.placeJob(ctx, tx, spec, now)
	if err != nil {
		return Job{}, fmt.Errorf("enqueue %s %s@%s: %w", spec.Tier, spec.Repo, spec.HeadSHA, err)
	}
	pool := fleet.Pool(spec.Labels, spec.GPUUUID)
	if err := s.notePool(ctx, tx, pool, spec); err != nil {
		return Job{}, fmt.Errorf("enqueue %s %s@%s: %w", spec.Tier, spec.Repo, spec.HeadSHA, err)
	}
	var id int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO jobs
		(tier, kind, repo, installation_id, pr_number, head_sha, base_sha, config, required_labels,
		 gpu_uuid, check_run_id, status, max_attempts, created_at, priority, share_key, vtag, vcost, vweight, seq, pool, age_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING id`),
		spec.Tier, spec.Kind, spec.Repo, spec.InstallationID, spec.PRNumber, spec.HeadSHA, spec.BaseSHA,
		blob(spec.Config), jsonList(spec.Labels), spec.GPUUUID, spec.CheckRunID, string(jobstate.Queued),
		spec.MaxAttempts, now, pl.priority, pl.key, pl.tag, pl.cost, s.shares.Weight(pl.key), pl.seq, pool, pl.ageAt).Scan(&id)
	if err != nil {
		return Job{}, fmt.Errorf("enqueue %s %s@%s: %w", spec.Tier, spec.Repo, spec.HeadSHA, err)
	}
	if err := s.notifyQueued(ctx, tx); err != nil {
		return Job{}, fmt.Errorf("enqueue %s %s@%s: %w", spec.Tier, spec.Repo, spec.HeadSHA, err)
	}
	// A job that took no one's place is last in its tenant's line: its
	// sequence is its own id.
	j, err := scanJob(tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET seq = CASE WHEN seq = 0 THEN id ELSE seq END
		WHERE id = ? RETURNING `+jobCols), id))
	if err != nil {
		return Job{}, fmt.Errorf("enqueue %s %s@%s: %w", spec.Tier, spec.Repo, spec.HeadSHA, err)
	}
	return j, nil
}

// Claim hands the first matching queued job in claim order — priority
// class, fair-share start tag, queue sequence: the order of the jobs_claim
// index, which the claim walks — to the agent under a fresh lease and
// records that the agent was seen (job or not). A drained agent gets
// ErrNoJob. On PostgreSQL it
// is one autocommit statement — the agent touch rides in a data-modifying
// CTE — and SKIP LOCKED lets concurrent claimers and replicas pass over a
// row another is taking. SQLite runs the same UPDATE inside BEGIN
// IMMEDIATE (SQLite has no DML in CTEs), which already makes claims serial.
func (s *sqlStore) Claim(ctx context.Context, req ClaimRequest) (Job, error) {
	if req.Lease <= 0 {
		return Job{}, fmt.Errorf("claim for agent %d: lease must be positive", req.AgentID)
	}
	lease, err := newLeaseID()
	if err != nil {
		return Job{}, err
	}
	now := s.now()
	var agent any
	if req.AgentID != 0 {
		agent = req.AgentID
	}
	// A runner no pool is for is answered without a walk of the queue
	// (pools.go); it was still seen.
	if ok, err := s.servesAnyPool(ctx, req); err != nil || !ok {
		if err == nil && req.AgentID != 0 {
			_, err = s.w.ExecContext(ctx, s.q(`UPDATE agents SET last_seen_at = ? WHERE id = ?`), now.UnixMicro(), req.AgentID)
		}
		if err != nil {
			return Job{}, fmt.Errorf("claim for agent %d: %w", req.AgentID, err)
		}
		return Job{}, ErrNoJob
	}
	claim := `UPDATE jobs SET
			status = 'running', attempts = attempts + 1, lease_id = ?, lease_expires_at = ?,
			agent_id = ?, started_at = ?, cancel_requested = FALSE, log_bytes = 0
		WHERE status = 'queued' AND id = (` + s.d.claimPick() + `)
		RETURNING ` + jobCols
	match := []any{req.AgentID, jsonList(req.Labels), jsonList(req.GPUUUIDs)}
	args := append([]any{lease, now.Add(req.Lease).UnixMicro(), agent, now.UnixMicro()}, match...)
	args = append(append(append(args, match...), now.UnixMicro()), match...)

	var j Job
	if s.d.dollar {
		touch := []any{now.UnixMicro(), req.AgentID}
		j, err = scanJob(s.w.QueryRowContext(ctx,
			s.q(`WITH seen AS (UPDATE agents SET last_seen_at = ? WHERE id = ?) `+claim), append(touch, args...)...))
	} else {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			if req.AgentID != 0 {
				if _, err := tx.ExecContext(ctx, `UPDATE agents SET last_seen_at = ? WHERE id = ?`,
					now.UnixMicro(), req.AgentID); err != nil {
					return fmt.Errorf("touch agent: %w", err)
				}
			}
			var err error
			j, err = scanJob(tx.QueryRowContext(ctx, claim, args...))
			if errors.Is(err, sql.ErrNoRows) {
				return errNoRowsCommit // commit anyway: the agent was seen
			}
			return err
		})
		if errors.Is(err, errNoRowsCommit) {
			err = sql.ErrNoRows
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, fmt.Errorf("claim for agent %d: %w", req.AgentID, err)
	}
	return j, nil
}

// claimPick selects the job a claim takes: the first merge job in claim
// order, else the job that has waited longest past its class's aging bound
// (fleet.AgeAfter; the jobs_aged index), else the first in claim order
// (jobs_claim). Its parameters are, for each of the three picks, the
// agent's id (a drained agent takes nothing), its labels and its GPUs; the
// aged pick takes the time now after them.
func (d dialect) claimPick() string {
	pick := `SELECT j.id FROM jobs j
			WHERE j.status = 'queued'
				AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = ? AND a.drained)
				AND ` + d.claimMatch
	return `COALESCE((` + pick + ` AND j.priority = ` + strconv.Itoa(fleet.PriorityMerge) + `
			ORDER BY j.priority, j.vtag, j.seq LIMIT 1` + d.skipLocked + `),
		(` + pick + ` AND j.age_at <= ?
			ORDER BY j.age_at, j.seq LIMIT 1` + d.skipLocked + `),
		(` + pick + `
			ORDER BY j.priority, j.vtag, j.seq LIMIT 1` + d.skipLocked + `))`
}

// Heartbeat extends the lease to now+extend and reports whether the job was
// asked to stop (superseded or cancelled).
func (s *sqlStore) Heartbeat(ctx context.Context, jobID int64, leaseID string, extend time.Duration) (bool, error) {
	if leaseID == "" {
		return false, ErrLeaseLost
	}
	var cancel bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		var agent sql.NullInt64
		err := tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET lease_expires_at = ?
			WHERE id = ? AND lease_id = ? AND status = 'running'
			RETURNING cancel_requested, agent_id`),
			now.Add(extend).UnixMicro(), jobID, leaseID).Scan(&cancel, &agent)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if agent.Valid {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE agents SET last_seen_at = ? WHERE id = ?`),
				now.UnixMicro(), agent.Int64); err != nil {
				return fmt.Errorf("touch agent: %w", err)
			}
		}
		return nil
	})
	if errors.Is(err, ErrLeaseLost) {
		return false, ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat job %d: %w", jobID, err)
	}
	return cancel, nil
}

// Finish ends the job under its lease. Repeating the same Finish (a retry
// after a lost response) returns the finished job instead of an error.
func (s *sqlStore) Finish(ctx context.Context, jobID int64, leaseID string, status jobstate.Status, reason string) (Job, error) {
	switch status {
	case jobstate.Succeeded, jobstate.Failed, jobstate.Cancelled:
	default:
		return Job{}, fmt.Errorf("finish job %d: status %q is not final", jobID, status)
	}
	if leaseID == "" {
		return Job{}, ErrLeaseLost
	}
	var (
		j   Job
		err error
	)
	now := s.nowMicros()
	if s.d.dollar {
		// One statement: the job's end and its attempt, with the charge
		// chargeAttempt computes (over the finished row).
		j, err = scanJob(s.w.QueryRowContext(ctx, s.q(`WITH done AS (
				UPDATE jobs SET status = ?, failure_reason = ?, finished_at = ?, lease_expires_at = NULL
				WHERE id = ? AND lease_id = ? AND status = 'running'
				RETURNING *),
			attempt AS (
				INSERT INTO gpu_attempts (job_id, attempt, repo, installation_id, tier, pool, agent_id, status, started_at, ended_at,
					priority, share_key, charge, folded)
				SELECT id, attempts, repo, installation_id, tier, pool, agent_id, status, started_at, GREATEST(finished_at, started_at),
					priority, share_key,
					GREATEST(finished_at - started_at, 0)::float8 / 1e6 / vweight - CASE WHEN attempts = 1 THEN vcost ELSE 0 END,
					share_key = ''
				FROM done WHERE started_at IS NOT NULL AND attempts > 0
				ON CONFLICT (job_id, attempt) DO NOTHING)
			SELECT `+jobCols+` FROM done`),
			string(status), reason, now, jobID, leaseID))
	} else {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			j, err = scanJob(tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET
					status = ?, failure_reason = ?, finished_at = ?, lease_expires_at = NULL
				WHERE id = ? AND lease_id = ? AND status = 'running'
				RETURNING `+jobCols),
				string(status), reason, now, jobID, leaseID))
			if err != nil {
				return err
			}
			return s.chargeAttempt(ctx, tx, j, j.AgentID, string(status), now)
		})
	}
	if err == nil {
		return j, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("finish job %d: %w", jobID, err)
	}
	cur, err := s.GetJob(ctx, jobID)
	if err != nil {
		return Job{}, fmt.Errorf("finish job %d: %w", jobID, err)
	}
	if cur.LeaseID == leaseID && cur.Status == status {
		return cur, nil
	}
	return Job{}, ErrLeaseLost
}

// ReapExpired takes back every running job whose lease lapsed: it is
// queued again (its attempt count kept) or, once it has used all its
// attempts, failed; a job already asked to stop is cancelled instead. Each
// decision is written to the audit log in the same transaction. It returns
// the jobs it changed, as they now are.
func (s *sqlStore) ReapExpired(ctx context.Context) ([]Job, error) {
	var out []Job
	requeued := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		rows, err := tx.QueryContext(ctx, s.q(`SELECT `+jobCols+` FROM jobs
			WHERE status = 'running' AND lease_expires_at < ?
			ORDER BY id`+s.d.skipLocked), now)
		if err != nil {
			return fmt.Errorf("select expired: %w", err)
		}
		expired, err := collectJobs(rows)
		if err != nil {
			return fmt.Errorf("select expired: %w", err)
		}
		for _, j := range expired {
			var (
				status jobstate.Status
				reason string
				action string
			)
			switch {
			case j.CancelRequested:
				status, reason, action = jobstate.Cancelled, "cancelled; agent lost before it stopped", "job.cancelled"
			case j.Attempts >= j.MaxAttempts:
				status, reason, action = jobstate.Failed, fmt.Sprintf("agent lost: lease expired %d times", j.Attempts), "job.failed"
			default:
				status, reason, action = jobstate.Queued, "", "job.requeued"
			}
			var finished any
			if status != jobstate.Queued {
				finished = now
			} else if !requeued {
				requeued = true
				if err := s.notifyQueued(ctx, tx); err != nil {
					return err
				}
			}
			if err := s.chargeAttempt(ctx, tx, j, j.AgentID, "lost", now); err != nil {
				return err
			}
			// lease_id is cleared so the lost agent's late calls are refused.
			row := tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET
					status = ?, failure_reason = ?, finished_at = ?, lease_id = '',
					lease_expires_at = NULL, agent_id = NULL
				WHERE id = ? RETURNING `+jobCols),
				string(status), reason, finished, j.ID)
			nj, err := scanJob(row)
			if err != nil {
				return fmt.Errorf("reap job %d: %w", j.ID, err)
			}
			detail, err := json.Marshal(map[string]any{
				"job_id": j.ID, "attempt": j.Attempts, "max_attempts": j.MaxAttempts,
				"agent_id": j.AgentID, "reason": "lease expired",
			})
			if err != nil {
				return fmt.Errorf("reap job %d: encode audit detail: %w", j.ID, err)
			}
			if err := insertAudit(ctx, s, tx, AuditEntry{Actor: "perfgate", Action: action,
				Repo: j.Repo, PRNumber: j.PRNumber, Detail: detail}, now); err != nil {
				return err
			}
			out = append(out, nj)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	if requeued {
		s.wake.broadcast()
	}
	return out, nil
}

// CancelSuperseded handles a push to a PR: its queued jobs for other head
// SHAs are cancelled, its running ones are asked to stop through their next
// heartbeat.
func (s *sqlStore) CancelSuperseded(ctx context.Context, repo string, pr int, newHeadSHA string) (Superseded, error) {
	return s.cancelPR(ctx, repo, pr, newHeadSHA, "superseded by "+rev.Log(newHeadSHA), "jobs.superseded")
}

// CancelPRJobs stops all of a PR's work (it was closed): queued jobs are
// cancelled, running ones asked to stop.
func (s *sqlStore) CancelPRJobs(ctx context.Context, repo string, pr int, reason string) (Superseded, error) {
	return s.cancelPR(ctx, repo, pr, "", reason, "jobs.cancelled")
}

// cancelPR cancels the PR's jobs whose head is not keepSHA ("" keeps none).
func (s *sqlStore) cancelPR(ctx context.Context, repo string, pr int, keepSHA, reason, action string) (Superseded, error) {
	var out Superseded
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		if err := s.lockFlows(ctx, tx, s.shares.Key(repo)); err != nil {
			return err
		}
		// A newer push's jobs take the places of the ones it cancels
		// (handoff; see placeJob).
		rows, err := tx.QueryContext(ctx, s.q(`UPDATE jobs SET status = 'cancelled', failure_reason = ?, finished_at = ?, handoff = ?
			WHERE repo = ? AND pr_number = ? AND head_sha <> ? AND status = 'queued'
			RETURNING `+jobCols), reason, now, keepSHA != "", repo, pr, keepSHA)
		if err != nil {
			return fmt.Errorf("cancel queued: %w", err)
		}
		if out.Cancelled, err = collectJobs(rows); err != nil {
			return fmt.Errorf("cancel queued: %w", err)
		}
		if err := s.refundQueued(ctx, tx, out.Cancelled); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, s.q(`UPDATE jobs SET cancel_requested = TRUE
			WHERE repo = ? AND pr_number = ? AND head_sha <> ? AND status = 'running' AND NOT cancel_requested
			RETURNING `+jobCols), repo, pr, keepSHA)
		if err != nil {
			return fmt.Errorf("signal running: %w", err)
		}
		if out.Signalled, err = collectJobs(rows); err != nil {
			return fmt.Errorf("signal running: %w", err)
		}
		if len(out.Cancelled)+len(out.Signalled) == 0 {
			return nil
		}
		detail, err := json.Marshal(map[string]any{
			"head_sha": keepSHA, "reason": reason, "cancelled": jobIDs(out.Cancelled), "signalled": jobIDs(out.Signalled),
		})
		if err != nil {
			return err
		}
		return insertAudit(ctx, s, tx, AuditEntry{Actor: "perfgate", Action: action,
			Repo: repo, PRNumber: pr, Detail: detail}, now)
	})
	if err != nil {
		return Superseded{}, fmt.Errorf("cancel jobs of %s#%d: %w", repo, pr, err)
	}
	return out, nil
}

// CancelJob cancels a queued job outright and asks a running one to stop.
// A finished job is returned unchanged.
func (s *sqlStore) CancelJob(ctx context.Context, jobID int64, reason string) (Job, error) {
	var j Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = cancelJobTx(ctx, s, tx, jobID, reason, s.nowMicros())
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("cancel job %d: %w", jobID, err)
	}
	return j, nil
}

func cancelJobTx(ctx context.Context, s *sqlStore, tx txer, jobID int64, reason string, now int64) (Job, error) {
	var key string
	err := tx.QueryRowContext(ctx, s.q(`SELECT share_key FROM jobs WHERE id = ?`), jobID).Scan(&key)
	if err != nil {
		return Job{}, notFound(err)
	}
	if err := s.lockFlows(ctx, tx, key); err != nil {
		return Job{}, err
	}
	// A queued job is cancelled and its charge refunded; the statement
	// changes nothing (no row) for a job in any other state.
	j, err := scanJob(tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET status = 'cancelled', failure_reason = ?, finished_at = ?
		WHERE id = ? AND status = 'queued' RETURNING `+jobCols), reason, now, jobID))
	if err == nil {
		return j, s.refundQueued(ctx, tx, []Job{j})
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Job{}, err
	}
	row := tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET
			cancel_requested = CASE WHEN status = 'running' THEN TRUE ELSE cancel_requested END
		WHERE id = ? RETURNING `+jobCols), jobID)
	j, err = scanJob(row)
	return j, notFound(err)
}

// ClaimFinishedJobs leases up to limit finished jobs that no worker has
// judged yet, oldest first. A job finished by an agent's request, by the
// reaper or by a cancel waits here until JobJudged, so a crash between the
// finish and the verdict loses nothing.
func (s *sqlStore) ClaimFinishedJobs(ctx context.Context, limit int, lease time.Duration) ([]JudgeClaim, error) {
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim finished jobs: limit and lease must be positive")
	}
	leaseID, err := s.serverLeaseID()
	if err != nil {
		return nil, err
	}
	now := s.now()
	rows, err := s.w.QueryContext(ctx, s.q(`UPDATE jobs SET judge_lease_id = ?, judge_lease_until = ?, judge_attempts = judge_attempts + 1
		WHERE id IN (SELECT id FROM jobs
			WHERE judged_at IS NULL AND status IN ('succeeded', 'failed', 'cancelled')
				AND (judge_next_at IS NULL OR judge_next_at <= ?) AND (judge_lease_until IS NULL OR judge_lease_until < ?)
			ORDER BY id LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+jobCols+`, judge_attempts`),
		leaseID, now.Add(lease).UnixMicro(), now.UnixMicro(), now.UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim finished jobs: %w", err)
	}
	defer rows.Close()
	var out []JudgeClaim
	for rows.Next() {
		var c JudgeClaim
		if c.Job, err = scanJobWith(rows, &c.Attempt); err != nil {
			return nil, fmt.Errorf("claim finished jobs: %w", err)
		}
		c.LeaseID = leaseID
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim finished jobs: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// JobJudged records that a claimed finished job has been judged.
func (s *sqlStore) JobJudged(ctx context.Context, jobID int64, leaseID string) error {
	return s.endJudge(ctx, "judged", jobID, leaseID, `judged_at = ?`, s.nowMicros())
}

// RetryJudge releases a claimed finished job to be judged again at at.
func (s *sqlStore) RetryJudge(ctx context.Context, jobID int64, leaseID string, at time.Time) error {
	return s.endJudge(ctx, "retry judging", jobID, leaseID, `judge_next_at = ?`, at.UnixMicro())
}

func (s *sqlStore) endJudge(ctx context.Context, what string, jobID int64, leaseID, set string, args ...any) error {
	if leaseID == "" {
		return ErrLeaseLost
	}
	args = append(args, jobID, leaseID)
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE jobs SET `+set+`, judge_lease_id = '', judge_lease_until = NULL
		WHERE id = ? AND judge_lease_id = ? AND judged_at IS NULL`), args...)
	if err != nil {
		return fmt.Errorf("%s job %d: %w", what, jobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s job %d: %w", what, jobID, err)
	}
	if n != 1 {
		return fmt.Errorf("%s job %d: %w", what, jobID, ErrLeaseLost)
	}
	return nil
}

func (s *sqlStore) GetJob(ctx context.Context, jobID int64) (Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, s.q(`SELECT `+jobCols+` FROM jobs WHERE id = ?`), jobID))
	if err != nil {
		return Job{}, fmt.Errorf("get job %d: %w", jobID, notFound(err))
	}
	return j, nil
}

// ListJobs returns matching jobs oldest first.
func (s *sqlStore) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	var (
		where []string
		args  []any
	)
	if f.Repo != "" {
		where, args = append(where, "repo = ?"), append(args, f.Repo)
	}
	if f.PRNumber != 0 {
		where, args = append(where, "pr_number = ?"), append(args, f.PRNumber)
	}
	if f.HeadSHA != "" {
		where, args = append(where, "head_sha = ?"), append(args, f.HeadSHA)
	}
	if f.Tier != "" {
		where, args = append(where, "tier = ?"), append(args, f.Tier)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	query := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	if f.ClaimOrder {
		query += ` ORDER BY ` + claimOrder(s.nowMicros())
	} else {
		query += ` ORDER BY id`
		if f.Newest {
			query += ` DESC`
		}
	}
	if f.Limit > 0 {
		query += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

func jobIDs(js []Job) []int64 {
	ids := make([]int64, 0, len(js))
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids
}
