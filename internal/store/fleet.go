package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// The claim order of a shared fleet. Claims walk the jobs_claim index
// (priority, vtag, seq):
//
//   - priority is the job's class (fleet.Priority): merge before quick
//     before nightly before batch work.
//   - vtag is the job's start tag under start-time fair queuing (Goyal,
//     Vin and Cheng, 1996) over tenants — repositories, or installations
//     (fleet.Shares). Each tenant has a virtual finish time per class
//     (fleet_flows); a job's tag is max(V, the tenant's finish) and moves
//     the finish on by the job's expected GPU-seconds divided by the
//     tenant's weight. V, the class's virtual time, is the largest tag
//     running (else the smallest queued, else the largest finish): a
//     tenant that was idle starts level with the others instead of
//     spending credit saved up, and a tenant's burst of 50 jobs is spread
//     out in virtual time, so another tenant's job queued after it is
//     claimed after at most one job per weight unit of each busy tenant.
//     When an attempt ends, the GPU time it really took minus the
//     estimate is charged to its tenant (chargeAttempt; folded into the
//     tenant's finish at its next enqueue), so a tenant whose jobs run
//     long waits longer next time: the share follows GPU time, not job
//     counts.
//   - seq is the queue sequence: the job's id, or — for a job of a newer
//     push — the sequence (and tag) of the queued job of the same PR and
//     tier it superseded (handoff), so a push does not lose its place.
//
// Tags are fixed at enqueue, so the claim is one index walk that stops at
// the first job the agent can run; the cost of fairness is paid once per
// job, at enqueue, in a few small index reads and two writes to the
// tenant's clock; claims and finishes never touch it.

// handoffWindow is how long a superseded job's place waits for the newer
// push's job: the push queues it in the same webhook, so a place unused
// this long belongs to a push that queued nothing.
const handoffWindow = time.Hour

type place struct {
	priority  int
	key       string
	tag, cost float64
	seq       int64
	ageAt     sql.NullInt64 // when it goes ahead of the strict order (fleet.AgeAfter)
}

// placeJob decides a new job's place in the claim order and charges its
// tenant's flow.
func (s *sqlStore) placeJob(ctx context.Context, tx txer, spec JobSpec, now int64) (place, error) {
	pl := place{priority: fleet.Priority(spec.Tier, spec.Kind), key: s.shares.Key(spec.Repo)}
	if err := s.lockFlows(ctx, tx, pl.key); err != nil {
		return place{}, err
	}
	if age := fleet.AgeAfter(pl.priority); age > 0 {
		pl.ageAt = sql.NullInt64{Int64: now + age.Microseconds(), Valid: true}
	}
	if spec.PRNumber > 0 {
		err := tx.QueryRowContext(ctx, s.q(`UPDATE jobs SET handoff = FALSE
			WHERE handoff AND id = (SELECT id FROM jobs
				WHERE repo = ? AND pr_number = ? AND tier = ? AND handoff AND priority = ? AND finished_at >= ?
				ORDER BY seq LIMIT 1`+s.d.skipLocked+`)
			RETURNING vtag, vcost, seq, age_at`),
			spec.Repo, spec.PRNumber, spec.Tier, pl.priority, now-handoffWindow.Microseconds()).Scan(&pl.tag, &pl.cost, &pl.seq, &pl.ageAt)
		if err == nil {
			// The superseded job left its tenant's line when it was
			// cancelled (refundQueued); this one takes its place.
			if err := s.insertInLine(ctx, tx, pl.priority, pl.key, pl.tag, pl.cost); err != nil {
				return place{}, err
			}
			return pl, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return place{}, fmt.Errorf("take the superseded job's place: %w", err)
		}
	}
	est, err := s.expectedSeconds(ctx, tx, spec.Tier)
	if err != nil {
		return place{}, err
	}
	pl.cost = est / s.shares.Weight(pl.key)
	v, err := s.virtualTime(ctx, tx, pl.priority)
	if err != nil {
		return place{}, err
	}
	if err := s.foldCharges(ctx, tx, pl.priority, pl.key); err != nil {
		return place{}, err
	}
	var finish float64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO fleet_flows (priority, share_key, finish) VALUES (?, ?, ?)
		ON CONFLICT (priority, share_key) DO UPDATE SET finish = `+s.d.greatest+`(fleet_flows.finish, ?) + ?
		RETURNING finish`), pl.priority, pl.key, v+pl.cost, v, pl.cost).Scan(&finish)
	if err != nil {
		return place{}, fmt.Errorf("charge %s: %w", pl.key, err)
	}
	pl.tag = finish - pl.cost
	return pl, nil
}

// virtualTime is the class's virtual time: the largest start tag running,
// else the smallest queued, else the largest finish of any tenant (the
// class is idle: everyone is even).
func (s *sqlStore) virtualTime(ctx context.Context, tx txer, priority int) (float64, error) {
	for _, q := range []string{
		`SELECT MAX(vtag) FROM jobs WHERE status = 'running' AND priority = ?`,
		`SELECT MIN(vtag) FROM jobs WHERE status = 'queued' AND priority = ?`,
		`SELECT MAX(finish) FROM fleet_flows WHERE priority = ?`,
	} {
		var v sql.NullFloat64
		if err := tx.QueryRowContext(ctx, s.q(q), priority).Scan(&v); err != nil {
			return 0, fmt.Errorf("virtual time of class %d: %w", priority, err)
		}
		if v.Valid {
			return v.Float64, nil
		}
	}
	return 0, nil
}

// expectedSeconds is the mean GPU time of the tier's last
// fleet.RecentWindow successful attempts, else the tier's default.
func (s *sqlStore) expectedSeconds(ctx context.Context, tx txer, tier string) (float64, error) {
	var avg sql.NullFloat64
	err := tx.QueryRowContext(ctx, s.q(`SELECT CAST(AVG(ended_at - started_at) AS DOUBLE PRECISION) FROM (
			SELECT ended_at, started_at FROM gpu_attempts WHERE tier = ? AND status = 'succeeded'
			ORDER BY ended_at DESC LIMIT ?) recent`), tier, fleet.RecentWindow).Scan(&avg)
	if err != nil {
		return 0, fmt.Errorf("recent %s durations: %w", tier, err)
	}
	if avg.Valid && avg.Float64 > 0 {
		return avg.Float64 / 1e6, nil
	}
	return fleet.DefaultDuration(tier).Seconds(), nil
}

// chargeAttempt records an attempt's time on its GPU (status: the job's
// final status, or "lost") with what its tenant owes for it beyond the
// estimate charged at enqueue: the GPU-seconds over the weight it was
// queued with, less that estimate (once, at the first attempt). The
// tenant's next enqueue folds the charge into its clock (foldCharges), so
// a finish never waits on the clock's row. Finish on PostgreSQL does the
// same in its one statement.
func (s *sqlStore) chargeAttempt(ctx context.Context, tx txer, j Job, agentID int64, status string, now int64) error {
	if j.StartedAt.IsZero() || j.Attempts == 0 {
		return nil // never ran
	}
	started := j.StartedAt.UnixMicro()
	var agent any
	if agentID != 0 {
		agent = agentID
	}
	charge := float64(max(now-started, 0)) / 1e6 / j.VWeight
	if j.Attempts == 1 {
		charge -= j.VCost
	}
	if math.IsNaN(charge) || math.IsInf(charge, 0) {
		charge = 0
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO gpu_attempts
			(job_id, attempt, repo, installation_id, tier, pool, agent_id, status, started_at, ended_at, priority, share_key, charge, folded)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job_id, attempt) DO NOTHING`),
		j.ID, j.Attempts, j.Repo, j.InstallationID, j.Tier, j.Pool, agent, status, started, max(now, started),
		j.Priority, j.ShareKey, charge, j.ShareKey == "")
	if err != nil {
		return fmt.Errorf("record attempt %d of job %d: %w", j.Attempts, j.ID, err)
	}
	return nil
}

// foldCharges adds the charges of the tenant's attempts that ended since
// its last enqueue to its clock.
func (s *sqlStore) foldCharges(ctx context.Context, tx txer, priority int, key string) error {
	var err error
	if s.d.dollar {
		// One statement: the attempts marked are exactly those summed,
		// whatever finishes meanwhile.
		_, err = tx.ExecContext(ctx, s.q(`WITH f AS (
				UPDATE gpu_attempts SET folded = TRUE WHERE priority = ? AND share_key = ? AND NOT folded RETURNING charge)
			UPDATE fleet_flows SET finish = finish + (SELECT COALESCE(SUM(charge), 0) FROM f)
			WHERE priority = ? AND share_key = ? AND EXISTS (SELECT 1 FROM f)`), priority, key, priority, key)
	} else {
		// SQLite's writes are serial: nothing lands between the two.
		if _, err = tx.ExecContext(ctx, `UPDATE fleet_flows SET finish = finish + (SELECT COALESCE(SUM(charge), 0) FROM gpu_attempts
				WHERE priority = ? AND share_key = ? AND NOT folded)
			WHERE priority = ? AND share_key = ?`, priority, key, priority, key); err == nil {
			_, err = tx.ExecContext(ctx, `UPDATE gpu_attempts SET folded = TRUE WHERE priority = ? AND share_key = ? AND NOT folded`, priority, key)
		}
	}
	if err != nil {
		return fmt.Errorf("fold %s's charges: %w", key, err)
	}
	return nil
}

// claimOrder is the ORDER BY of queued jobs in the order claims take them
// at now (claimPick): merge work, then the jobs past their aging bound,
// longest overdue first, then priority, fair-share tag and sequence.
func claimOrder(now int64) string {
	aged := fmt.Sprintf(`priority <> %d AND age_at <= %d`, fleet.PriorityMerge, now)
	return fmt.Sprintf(`CASE WHEN priority = %d THEN 0 WHEN %s THEN 1 ELSE 2 END,
		CASE WHEN %s THEN age_at ELSE 0 END, CASE WHEN %s THEN 0 ELSE priority END,
		CASE WHEN %s THEN 0 ELSE vtag END, seq`, fleet.PriorityMerge, aged, aged, aged, aged)
}

// QueueEntry is a queued or running job, as the queue estimate reads it.
type QueueEntry struct {
	ID, CheckRunID      int64
	Repo, Tier, HeadSHA string
	Labels              []string
	GPUUUID             string
	Status              jobstate.Status
	Priority            int
	// The job's place in its class's fair share: its tenant, start tag
	// and cost, and when it ages past the strict order (zero: never).
	ShareKey    string
	VTag, VCost float64
	AgeAt       time.Time
	AgentID     int64     // running jobs
	StartedAt   time.Time // running jobs
}

// ListQueue returns the queued jobs in claim order, then the running ones,
// without their plans: what a queue estimate needs, cheaply.
func (s *sqlStore) ListQueue(ctx context.Context) ([]QueueEntry, error) {
	const cols = `SELECT id, check_run_id, repo, tier, head_sha, required_labels, gpu_uuid, status, priority, agent_id, started_at,
		share_key, vtag, vcost, age_at FROM jobs`
	var out []QueueEntry
	for _, q := range []string{
		cols + ` WHERE status = 'queued' ORDER BY ` + claimOrder(s.nowMicros()),
		cols + ` WHERE status = 'running' ORDER BY id`,
	} {
		rows, err := s.r.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("list queue: %w", err)
		}
		for rows.Next() {
			var (
				e              QueueEntry
				labels, status string
				agent, started sql.NullInt64
				ageAt          sql.NullInt64
			)
			if err := rows.Scan(&e.ID, &e.CheckRunID, &e.Repo, &e.Tier, &e.HeadSHA, &labels, &e.GPUUUID, &status, &e.Priority, &agent, &started,
				&e.ShareKey, &e.VTag, &e.VCost, &ageAt); err != nil {
				rows.Close()
				return nil, fmt.Errorf("list queue: %w", err)
			}
			if e.Labels, err = parseList(labels); err != nil {
				rows.Close()
				return nil, fmt.Errorf("list queue: job %d: %w", e.ID, err)
			}
			e.Status, e.AgentID, e.StartedAt, e.AgeAt = jobstate.Status(status), agent.Int64, fromMicros(started), fromMicros(ageAt)
			out = append(out, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("list queue: %w", err)
		}
	}
	return out, nil
}

// Attempt is one attempt of a job on a GPU.
type Attempt struct {
	JobID          int64
	Attempt        int
	Repo           string
	InstallationID int64
	Tier           string
	Pool           string // fleet.Pool of the job's labels and pin
	AgentID        int64
	// Status is the job's final status, or "lost" for an attempt whose
	// agent stopped calling in.
	Status    string
	StartedAt time.Time
	EndedAt   time.Time
}

// AttemptFilter selects attempts; zero fields match all.
type AttemptFilter struct {
	Repo, Tier string
	// Since and Until bound the attempts' end (Until exclusive).
	Since, Until time.Time
	// Succeeded keeps only attempts of jobs that succeeded.
	Succeeded bool
	Limit     int
}

// ListAttempts returns matching attempts, newest first.
func (s *sqlStore) ListAttempts(ctx context.Context, f AttemptFilter) ([]Attempt, error) {
	query := `SELECT job_id, attempt, repo, installation_id, tier, pool, agent_id, status, started_at, ended_at
		FROM gpu_attempts WHERE ended_at >= ? AND ended_at < ?`
	args := []any{micros0(f.Since), untilMicros(f.Until)}
	if f.Repo != "" {
		query, args = query+` AND repo = ?`, append(args, f.Repo)
	}
	if f.Tier != "" {
		query, args = query+` AND tier = ?`, append(args, f.Tier)
	}
	if f.Succeeded {
		query += ` AND status = 'succeeded'`
	}
	query += ` ORDER BY ended_at DESC, job_id DESC, attempt DESC`
	if f.Limit > 0 {
		query += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var (
			a              Attempt
			agent          sql.NullInt64
			started, ended int64
		)
		if err := rows.Scan(&a.JobID, &a.Attempt, &a.Repo, &a.InstallationID, &a.Tier, &a.Pool, &agent, &a.Status, &started, &ended); err != nil {
			return nil, fmt.Errorf("list attempts: %w", err)
		}
		a.AgentID = agent.Int64
		a.StartedAt, a.EndedAt = time.UnixMicro(started).UTC(), time.UnixMicro(ended).UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return out, nil
}

// UsageFilter selects the period (and optionally one repository) Usage
// sums.
type UsageFilter struct {
	Repo         string
	Since, Until time.Time // Until exclusive; zero: no bound
}

// Usage sums the fleet's GPU time, jobs, baseline reuse and regressions
// caught by repository, tier and ISO week (fleet.Usage). GPU time, jobs
// and reuses are summed by the database, grouped by the Monday that
// starts each week, so memory follows the rows of the answer, not the
// attempts (1.12 M attempts took 593 MB when they were loaded); only the
// regressions, few and deduplicated by commit, are read one by one.
func (s *sqlStore) Usage(ctx context.Context, f UsageFilter) ([]fleet.UsageRow, error) {
	// Days since the epoch (a Thursday) of the Monday that starts the
	// week of a time in microseconds; integer division in both
	// databases.
	monday := func(col string) string {
		day := `(` + col + ` / 86400000000)`
		return `(` + day + ` - (` + day + ` + 3) % 7)`
	}
	where, args := ` WHERE ended_at >= ? AND ended_at < ? AND started_at > 0 AND ended_at >= started_at`,
		[]any{micros0(f.Since), untilMicros(f.Until)}
	if f.Repo != "" {
		where, args = where+` AND repo = ?`, append(args, f.Repo)
	}
	attempts, err := s.usageRows(ctx, `SELECT repo, tier, `+monday("ended_at")+` AS monday,
			CAST(SUM(ended_at - started_at) AS DOUBLE PRECISION), COUNT(DISTINCT job_id)
		FROM gpu_attempts`+where+` GROUP BY repo, tier, monday`, args, func(r *fleet.UsageRow, sum float64, n int) {
		r.GPUHours, r.Jobs = sum/3.6e9, n
	})
	if err != nil {
		return nil, fmt.Errorf("usage: attempts: %w", err)
	}
	where, args = ` WHERE created_at >= ? AND created_at < ?`, []any{micros0(f.Since), untilMicros(f.Until)}
	if f.Repo != "" {
		where, args = where+` AND repo = ?`, append(args, f.Repo)
	}
	reuses, err := s.usageRows(ctx, `SELECT repo, tier, `+monday("created_at")+` AS monday, 0.0, COUNT(*)
		FROM check_runs`+where+` AND reused_baseline GROUP BY repo, tier, monday`, args, func(r *fleet.UsageRow, _ float64, n int) {
		r.BaselineReuse = n
	})
	if err != nil {
		return nil, fmt.Errorf("usage: checks: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT repo, detail, created_at FROM audit_log`+where+
		` AND action = 'gate.regression'`), args...)
	if err != nil {
		return nil, fmt.Errorf("usage: regressions: %w", err)
	}
	defer rows.Close()
	var regs []fleet.UsageRegression
	for rows.Next() {
		var (
			g       fleet.UsageRegression
			detail  string
			created int64
		)
		if err := rows.Scan(&g.Repo, &detail, &created); err != nil {
			return nil, fmt.Errorf("usage: regressions: %w", err)
		}
		var d struct {
			SHA        string  `json:"sha"`
			Tier       string  `json:"tier"`
			MonthlyUSD float64 `json:"monthly_usd"`
		}
		if doc := parseDoc(detail); doc != nil {
			if err := json.Unmarshal(doc, &d); err != nil {
				return nil, fmt.Errorf("usage: regression entry of %s: %w", g.Repo, err)
			}
		}
		g.SHA, g.Tier, g.At, g.MonthlyUSD = d.SHA, d.Tier, time.UnixMicro(created).UTC(), d.MonthlyUSD
		regs = append(regs, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: regressions: %w", err)
	}
	return fleet.MergeUsage(attempts, reuses, fleet.Usage(nil, nil, regs)), nil
}

// usageRows reads (repo, tier, monday, sum, count) groups into usage rows;
// set fills a row's measures.
func (s *sqlStore) usageRows(ctx context.Context, query string, args []any, set func(r *fleet.UsageRow, sum float64, n int)) ([]fleet.UsageRow, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fleet.UsageRow
	for rows.Next() {
		var (
			r      fleet.UsageRow
			monday int64
			sum    float64
			n      int
		)
		if err := rows.Scan(&r.Repo, &r.Tier, &monday, &sum, &n); err != nil {
			return nil, err
		}
		r.Week, r.WeekStart = fleet.Week(time.Unix(monday*86400, 0))
		set(&r, sum, n)
		out = append(out, r)
	}
	return out, rows.Err()
}

func micros0(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func untilMicros(t time.Time) int64 {
	if t.IsZero() {
		return math.MaxInt64
	}
	return t.UnixMicro()
}

// reusedBaseline reads from a check run's verdict document (the
// dispatcher's: report.design, baseline_job) whether it reused a stored
// baseline, for the reused_baseline column usage counts.
func reusedBaseline(verdict json.RawMessage) bool {
	if len(verdict) == 0 {
		return false
	}
	var v struct {
		Report *struct {
			Design string `json:"design"`
		} `json:"report"`
		BaselineJob int64 `json:"baseline_job"`
	}
	if err := json.Unmarshal(verdict, &v); err != nil || v.Report == nil {
		return false
	}
	return fleet.ReusedBaseline(v.Report.Design, v.BaselineJob)
}
