package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

const checkRunCols = `id, repo, head_sha, tier, pr_number, installation_id, github_id, job_ids, state, verdict,
	deadline_at, created_at, updated_at, generation, desired, desired_version, synced_version, create_attempted, request_key`

func scanCheckRun(sc scanner) (CheckRun, error) {
	var (
		c                          CheckRun
		jobs, verdict, desired     string
		deadline, created, updated sql.NullInt64
	)
	if err := sc.Scan(&c.ID, &c.Repo, &c.HeadSHA, &c.Tier, &c.PRNumber, &c.InstallationID, &c.GitHubID,
		&jobs, &c.State, &verdict, &deadline, &created, &updated, &c.Generation, &desired, &c.DesiredVersion,
		&c.SyncedVersion, &c.CreateAttempted, &c.RequestKey); err != nil {
		return CheckRun{}, err
	}
	var err error
	if c.JobIDs, err = parseInts(jobs); err != nil {
		return CheckRun{}, fmt.Errorf("check run %d: %w", c.ID, err)
	}
	c.Verdict = parseDoc(verdict)
	if d := parseDoc(desired); d != nil {
		c.Desired = &CheckOutput{}
		if err := json.Unmarshal(d, c.Desired); err != nil {
			return CheckRun{}, fmt.Errorf("check run %d: desired state: %w", c.ID, err)
		}
	}
	c.Deadline = fromMicros(deadline)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	return c, nil
}

// PutCheckRun creates or replaces the row for (Repo, HeadSHA, Tier) with
// every other field of c, and returns it as stored.
func (s *sqlStore) PutCheckRun(ctx context.Context, c CheckRun) (CheckRun, error) {
	if c.Repo == "" || c.HeadSHA == "" || c.Tier == "" || c.State == "" {
		return CheckRun{}, fmt.Errorf("put check run: repo, head SHA, tier and state are required")
	}
	verdict, err := jsonDoc(c.Verdict)
	if err != nil {
		return CheckRun{}, fmt.Errorf("put check run %s@%s %s: verdict: %w", c.Repo, c.HeadSHA, c.Tier, err)
	}
	now := s.nowMicros()
	out, err := scanCheckRun(s.w.QueryRowContext(ctx, s.q(`INSERT INTO check_runs
		(repo, head_sha, tier, pr_number, installation_id, github_id, job_ids, state, verdict, deadline_at, created_at, updated_at, reused_baseline)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, head_sha, tier) DO UPDATE SET
			pr_number = excluded.pr_number, installation_id = excluded.installation_id,
			github_id = excluded.github_id, job_ids = excluded.job_ids, state = excluded.state,
			verdict = excluded.verdict, deadline_at = excluded.deadline_at, updated_at = excluded.updated_at,
			reused_baseline = excluded.reused_baseline
		RETURNING `+checkRunCols),
		c.Repo, c.HeadSHA, c.Tier, c.PRNumber, c.InstallationID, c.GitHubID, jsonInts(c.JobIDs), c.State,
		verdict, micros(c.Deadline), now, now, reusedBaseline(c.Verdict)))
	if err != nil {
		return CheckRun{}, fmt.Errorf("put check run %s@%s %s: %w", c.Repo, c.HeadSHA, c.Tier, err)
	}
	return out, nil
}

func (s *sqlStore) GetCheckRun(ctx context.Context, repo, headSHA, tier string) (CheckRun, error) {
	c, err := scanCheckRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs
		WHERE repo = ? AND head_sha = ? AND tier = ?`), repo, headSHA, tier))
	if err != nil {
		return CheckRun{}, fmt.Errorf("get check run %s@%s %s: %w", repo, headSHA, tier, notFound(err))
	}
	return c, nil
}

// CheckRunByGitHubID finds the row for a check_run webhook (rerequested,
// requested_action), which carries GitHub's ID.
func (s *sqlStore) CheckRunByGitHubID(ctx context.Context, githubID int64) (CheckRun, error) {
	c, err := scanCheckRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs
		WHERE github_id = ? ORDER BY id DESC LIMIT 1`), githubID))
	if err != nil {
		return CheckRun{}, fmt.Errorf("check run by GitHub ID %d: %w", githubID, notFound(err))
	}
	return c, nil
}

// ListCheckRuns returns a PR's check runs oldest first.
func (s *sqlStore) ListCheckRuns(ctx context.Context, repo string, pr int) ([]CheckRun, error) {
	return s.queryCheckRuns(ctx, fmt.Sprintf("list check runs %s#%d", repo, pr), `SELECT `+checkRunCols+` FROM check_runs
		WHERE repo = ? AND pr_number = ? ORDER BY id`, repo, pr)
}

// TransitionCheckRun moves the row to to.State only if it is still in
// state from, and reports whether it did. Replicas racing on the same
// escalation therefore post its comment once: only the winner gets true.
func (s *sqlStore) TransitionCheckRun(ctx context.Context, id int64, from string, to CheckTransition) (bool, error) {
	verdict := any(nil) // nil keeps the stored verdict
	if to.Verdict != nil {
		v, err := jsonDoc(to.Verdict)
		if err != nil {
			return false, fmt.Errorf("transition check run %d: verdict: %w", id, err)
		}
		verdict = v
	}
	cast := ""
	if s.d.dollar {
		cast = "::jsonb" // an untyped NULL parameter needs a type in COALESCE
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE check_runs SET state = ?, verdict = COALESCE(?`+cast+`, verdict),
			reused_baseline = CASE WHEN ? THEN ? ELSE reused_baseline END, deadline_at = ?, updated_at = ?
		WHERE id = ? AND state = ?`),
		to.State, verdict, to.Verdict != nil, reusedBaseline(to.Verdict), micros(to.Deadline), s.nowMicros(), id, from)
	if err != nil {
		return false, fmt.Errorf("transition check run %d %s→%s: %w", id, from, to.State, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("transition check run %d %s→%s: %w", id, from, to.State, err)
	}
	return n == 1, nil
}

// DueCheckRuns returns check runs whose escalation deadline is at or before
// the store clock's now, earliest first. The app clears the deadline when
// it resolves or escalates one (PutCheckRun/TransitionCheckRun with a zero
// Deadline).
func (s *sqlStore) DueCheckRuns(ctx context.Context) ([]CheckRun, error) {
	return s.queryCheckRuns(ctx, "due check runs", `SELECT `+checkRunCols+` FROM check_runs
		WHERE deadline_at IS NOT NULL AND deadline_at <= ? ORDER BY deadline_at, id`, s.nowMicros())
}

func (s *sqlStore) queryCheckRuns(ctx context.Context, what, query string, args ...any) ([]CheckRun, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []CheckRun
	for rows.Next() {
		c, err := scanCheckRun(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ListOpenCheckRuns returns the rows still waiting for their jobs (queued
// or in progress), oldest first, for the reconciler.
func (s *sqlStore) ListOpenCheckRuns(ctx context.Context) ([]CheckRun, error) {
	return s.queryCheckRuns(ctx, "list open check runs", `SELECT `+checkRunCols+` FROM check_runs
		WHERE state IN ('queued', 'in_progress') ORDER BY id`)
}

// GetCheckRunByID returns one row.
func (s *sqlStore) GetCheckRunByID(ctx context.Context, id int64) (CheckRun, error) {
	c, err := scanCheckRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs WHERE id = ?`), id))
	if err != nil {
		return CheckRun{}, fmt.Errorf("get check run %d: %w", id, notFound(err))
	}
	return c, nil
}

// ApplyCheck makes one lifecycle step of a check run row in one
// transaction: the row's new state, jobs enqueued or cancelled, the desired
// GitHub state (re-arming its sync in the outbox), other GitHub writes and
// audit entries. With ID set it is a compare-and-set on the row's state and
// generation: when another replica or a concurrent event moved the row
// first, nothing is written and applied is false. With ID 0 it creates the
// row for (Repo, HeadSHA, Tier); applied is false when one already exists.
func (s *sqlStore) ApplyCheck(ctx context.Context, ch CheckChange) (CheckRun, bool, error) {
	if ch.State == "" {
		return CheckRun{}, false, fmt.Errorf("apply check change: state is required")
	}
	var (
		out     CheckRun
		applied bool
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		var cur CheckRun
		if ch.ID == 0 {
			if ch.Repo == "" || ch.HeadSHA == "" || ch.Tier == "" {
				return fmt.Errorf("create check run: repo, head SHA and tier are required")
			}
			var id int64
			err := tx.QueryRowContext(ctx, s.q(`INSERT INTO check_runs
					(repo, head_sha, tier, pr_number, installation_id, state, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (repo, head_sha, tier) DO NOTHING RETURNING id`),
				ch.Repo, ch.HeadSHA, ch.Tier, ch.PRNumber, ch.InstallationID, ch.State, now, now).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // another writer created it first
			}
			if err != nil {
				return fmt.Errorf("create check run %s@%s %s: %w", ch.Repo, ch.HeadSHA, ch.Tier, err)
			}
			if cur, err = scanCheckRun(tx.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs WHERE id = ?`), id)); err != nil {
				return fmt.Errorf("create check run %d: %w", id, err)
			}
			ch.From, ch.FromGeneration = cur.State, cur.Generation
		} else {
			var err error
			cur, err = scanCheckRun(tx.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs WHERE id = ?`+s.d.forUpdate), ch.ID))
			if err != nil {
				return fmt.Errorf("check run %d: %w", ch.ID, notFound(err))
			}
			if cur.State != ch.From || cur.Generation != ch.FromGeneration {
				return nil
			}
		}
		next, err := s.applyCheck(ctx, tx, cur, ch, now)
		if err != nil {
			return err
		}
		out, applied = next, true
		return nil
	})
	if errors.Is(err, errBaselineTaken) {
		return CheckRun{}, false, nil // rolled back: the caller reads the new baseline and decides again
	}
	if err != nil {
		return CheckRun{}, false, fmt.Errorf("apply check change %s→%s: %w", ch.From, ch.State, err)
	}
	if applied && (len(ch.AddJobs) > 0 || ch.BaseJob != nil || ch.ProfileJob != nil) {
		s.wake.broadcast()
	}
	return out, applied, nil
}

// errBaselineTaken: a baseline a step promotes has a version another
// promotion took since the caller read the history; the step is rolled
// back and not applied.
var errBaselineTaken = errors.New("baseline version taken")

// promoteTx stores a step's baselines, each with its audit entries.
func (s *sqlStore) promoteTx(ctx context.Context, tx *sql.Tx, bs []NewBaseline, now int64) error {
	for _, nb := range bs {
		if nb.Baseline.Version <= 0 {
			return fmt.Errorf("promote %s %s with the step: an explicit version is required", nb.Baseline.Repo, nb.Baseline.Key)
		}
		saved, err := s.putBaselineTx(ctx, tx, nb.Baseline, now)
		if errors.Is(err, ErrConflict) {
			return errBaselineTaken
		}
		if err != nil {
			return fmt.Errorf("promote %s %s: %w", nb.Baseline.Repo, nb.Baseline.Key, err)
		}
		if nb.Audit == nil {
			continue
		}
		entries, err := nb.Audit(saved)
		if err != nil {
			return fmt.Errorf("promote %s %s: %w", saved.Repo, saved.Key, err)
		}
		for _, a := range entries {
			if err := insertAudit(ctx, s, tx, a, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// judgementTx writes what a judgement's step carries beside the row: its
// first baselines, its trend points, the profiling pass a regression
// queues and the base commit's job, whose ID goes into verdict (returned).
func (s *sqlStore) judgementTx(ctx context.Context, tx *sql.Tx, cur CheckRun, ch CheckChange, verdict json.RawMessage, now int64) (json.RawMessage, error) {
	if err := s.promoteTx(ctx, tx, ch.Baselines, now); err != nil {
		return nil, err
	}
	for _, p := range ch.Trends {
		if err := s.putTrend(ctx, tx, p); err != nil {
			return nil, err
		}
	}
	if ch.ProfileJob != nil {
		if _, err := s.enqueueTx(ctx, tx, *ch.ProfileJob, now); err != nil {
			return nil, fmt.Errorf("profiling pass: %w", err)
		}
	}
	if ch.BaseJob == nil {
		return verdict, nil
	}
	spec := *ch.BaseJob
	spec.CheckRunID = cur.ID
	j, err := s.enqueueTx(ctx, tx, spec, now)
	if err != nil {
		return nil, fmt.Errorf("base commit's job: %w", err)
	}
	return withBaselineJob(verdict, j.ID)
}

// withBaselineJob is a verdict document with "baseline_job" set to id.
func withBaselineJob(verdict json.RawMessage, id int64) (json.RawMessage, error) {
	doc := map[string]json.RawMessage{}
	if len(verdict) > 0 && string(verdict) != "null" {
		if err := json.Unmarshal(verdict, &doc); err != nil {
			return nil, fmt.Errorf("verdict: %w", err)
		}
	}
	doc["baseline_job"] = json.RawMessage(strconv.FormatInt(id, 10))
	return json.Marshal(doc)
}

func (s *sqlStore) applyCheck(ctx context.Context, tx *sql.Tx, cur CheckRun, ch CheckChange, now int64) (CheckRun, error) {
	jobs := cur.JobIDs
	if ch.JobIDs != nil {
		jobs = append([]int64{}, ch.JobIDs...)
	}
	for _, spec := range ch.AddJobs {
		spec.CheckRunID = cur.ID
		j, err := s.enqueueTx(ctx, tx, spec, now)
		if err != nil {
			return CheckRun{}, err
		}
		jobs = append(jobs, j.ID)
	}
	for _, id := range ch.CancelJobs {
		if _, err := cancelJobTx(ctx, s, tx, id, ch.CancelReason, now); err != nil && !errors.Is(err, ErrNotFound) {
			return CheckRun{}, err
		}
	}
	verdict := cur.Verdict
	if ch.Verdict != nil {
		verdict = ch.Verdict
	}
	verdict, err := s.judgementTx(ctx, tx, cur, ch, verdict, now)
	if err != nil {
		return CheckRun{}, err
	}
	vdoc, err := jsonDoc(verdict)
	if err != nil {
		return CheckRun{}, fmt.Errorf("verdict: %w", err)
	}
	gen, githubID, attempted := cur.Generation, cur.GitHubID, cur.CreateAttempted
	if ch.NewGeneration {
		if err := s.cancelReplaced(ctx, tx, cur, ch.CancelOld, now); err != nil {
			return CheckRun{}, err
		}
		gen, githubID, attempted = gen+1, 0, false
	}
	desired, version := "null", cur.DesiredVersion
	if cur.Desired != nil {
		b, err := json.Marshal(cur.Desired)
		if err != nil {
			return CheckRun{}, fmt.Errorf("desired state: %w", err)
		}
		desired = string(b)
	}
	if ch.Desired != nil {
		b, err := json.Marshal(ch.Desired)
		if err != nil {
			return CheckRun{}, fmt.Errorf("desired state: %w", err)
		}
		desired, version = string(b), version+1
	}
	key := cur.RequestKey
	if ch.RequestKey != "" {
		key = ch.RequestKey
	}
	pr, inst := cur.PRNumber, cur.InstallationID
	if ch.PRNumber != 0 {
		pr = ch.PRNumber
	}
	if ch.InstallationID != 0 {
		inst = ch.InstallationID
	}
	next, err := scanCheckRun(tx.QueryRowContext(ctx, s.q(`UPDATE check_runs SET
			state = ?, deadline_at = ?, verdict = ?, reused_baseline = ?, job_ids = ?, generation = ?, github_id = ?, create_attempted = ?,
			desired = ?, desired_version = ?, request_key = ?, pr_number = ?, installation_id = ?, updated_at = ?
		WHERE id = ? RETURNING `+checkRunCols),
		ch.State, micros(ch.Deadline), vdoc, reusedBaseline(verdict), jsonInts(jobs), gen, githubID, attempted,
		desired, version, key, pr, inst, now, cur.ID))
	if err != nil {
		return CheckRun{}, fmt.Errorf("update check run %d: %w", cur.ID, err)
	}
	if ch.Desired != nil {
		if err := s.armCheckSync(ctx, tx, next, now); err != nil {
			return CheckRun{}, err
		}
	}
	for _, e := range ch.Effects {
		if e.InstallationID == 0 {
			e.InstallationID = next.InstallationID
		}
		if e.Repo == "" {
			e.Repo = next.Repo
		}
		if _, err := s.putEffect(ctx, tx, e, now); err != nil {
			return CheckRun{}, err
		}
	}
	for _, a := range ch.Audit {
		if err := insertAudit(ctx, s, tx, a, now); err != nil {
			return CheckRun{}, err
		}
	}
	return next, nil
}

// cancelReplaced queues the conclusion of the GitHub check run a row stops
// reporting to. A run never created needs nothing; one whose creation was
// attempted but not recorded (the answer was lost) is looked up by its
// external ID and cancelled if it exists.
func (s *sqlStore) cancelReplaced(ctx context.Context, tx txer, cur CheckRun, how *CheckCancelBody, now int64) error {
	open := cur.State == CheckQueued || cur.State == CheckInProgress
	if cur.Desired != nil {
		// Completed on GitHub only once the completed state was synced.
		open = cur.Desired.Status != "completed" || cur.SyncedVersion < cur.DesiredVersion
	}
	if how == nil || !open || cur.GitHubID == 0 && !cur.CreateAttempted {
		return nil // nothing open on GitHub to conclude
	}
	body := *how
	body.GitHubID = cur.GitHubID
	if cur.Desired != nil && body.Name == "" {
		body.Name = cur.Desired.Name
	}
	body.HeadSHA = cur.HeadSHA
	body.ExternalID = ExternalID(cur.PRNumber, cur.ID, cur.Generation)
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("cancel replaced check run: %w", err)
	}
	_, err = s.putEffect(ctx, tx, Effect{Key: fmt.Sprintf("cancel:%d.%d", cur.ID, cur.Generation), Kind: EffectCheckCancel,
		InstallationID: cur.InstallationID, Repo: cur.Repo, Body: raw}, now)
	return err
}

// MarkCheckCreateAttempt records that the GitHub check run of the row's
// generation is being created, so a retry after a lost answer looks for it
// before creating another.
func (s *sqlStore) MarkCheckCreateAttempt(ctx context.Context, id int64, generation int) error {
	_, err := s.w.ExecContext(ctx, s.q(`UPDATE check_runs SET create_attempted = TRUE WHERE id = ? AND generation = ?`), id, generation)
	if err != nil {
		return fmt.Errorf("mark check run %d create attempt: %w", id, err)
	}
	return nil
}

// CheckSynced records that GitHub confirmed version of the row's desired
// state on GitHub check run githubID, for the row's generation gen. When
// the row moved on to a new generation meanwhile, the check run just
// created belongs to nobody: it is queued for cancelling and current is
// false.
func (s *sqlStore) CheckSynced(ctx context.Context, id int64, gen int, githubID int64, version int) (bool, error) {
	current := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.nowMicros()
		cur, err := scanCheckRun(tx.QueryRowContext(ctx, s.q(`SELECT `+checkRunCols+` FROM check_runs WHERE id = ?`+s.d.forUpdate), id))
		if err != nil {
			return fmt.Errorf("check run %d: %w", id, notFound(err))
		}
		if cur.Generation != gen {
			if githubID == 0 || githubID == cur.GitHubID {
				return nil
			}
			name := ""
			if cur.Desired != nil {
				name = cur.Desired.Name
			}
			raw, err := json.Marshal(CheckCancelBody{GitHubID: githubID, Name: name, Title: "Replaced by a newer run",
				Summary: "perfgate started a newer run of this check before this one was recorded; see the latest run."})
			if err != nil {
				return err
			}
			_, err = s.putEffect(ctx, tx, Effect{Key: fmt.Sprintf("cancel:%d.%d", id, gen), Kind: EffectCheckCancel,
				InstallationID: cur.InstallationID, Repo: cur.Repo, Body: raw}, now)
			return err
		}
		current = true
		_, err = tx.ExecContext(ctx, s.q(`UPDATE check_runs SET
				github_id = CASE WHEN github_id = 0 THEN ? ELSE github_id END,
				synced_version = CASE WHEN synced_version < ? THEN ? ELSE synced_version END
			WHERE id = ?`), githubID, version, version, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("check run %d synced: %w", id, err)
	}
	return current, nil
}

// ExternalID is what perfgate puts in a check run's external_id: the PR
// number first (check_run.pull_requests is empty for forks), then the row
// and generation, which find a run whose creation answer was lost.
func ExternalID(pr int, rowID int64, gen int) string {
	return fmt.Sprintf("%d:%d.%d", pr, rowID, gen)
}
