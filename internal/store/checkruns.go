package store

import (
	"context"
	"database/sql"
	"fmt"
)

const checkRunCols = `id, repo, head_sha, tier, pr_number, installation_id, github_id, job_ids, state, verdict,
	deadline_at, created_at, updated_at`

func scanCheckRun(sc scanner) (CheckRun, error) {
	var (
		c                          CheckRun
		jobs, verdict              string
		deadline, created, updated sql.NullInt64
	)
	if err := sc.Scan(&c.ID, &c.Repo, &c.HeadSHA, &c.Tier, &c.PRNumber, &c.InstallationID, &c.GitHubID,
		&jobs, &c.State, &verdict, &deadline, &created, &updated); err != nil {
		return CheckRun{}, err
	}
	var err error
	if c.JobIDs, err = parseInts(jobs); err != nil {
		return CheckRun{}, fmt.Errorf("check run %d: %w", c.ID, err)
	}
	c.Verdict = parseDoc(verdict)
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
		(repo, head_sha, tier, pr_number, installation_id, github_id, job_ids, state, verdict, deadline_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, head_sha, tier) DO UPDATE SET
			pr_number = excluded.pr_number, installation_id = excluded.installation_id,
			github_id = excluded.github_id, job_ids = excluded.job_ids, state = excluded.state,
			verdict = excluded.verdict, deadline_at = excluded.deadline_at, updated_at = excluded.updated_at
		RETURNING `+checkRunCols),
		c.Repo, c.HeadSHA, c.Tier, c.PRNumber, c.InstallationID, c.GitHubID, jsonInts(c.JobIDs), c.State,
		verdict, micros(c.Deadline), now, now))
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
			deadline_at = ?, updated_at = ?
		WHERE id = ? AND state = ?`),
		to.State, verdict, micros(to.Deadline), s.nowMicros(), id, from)
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
