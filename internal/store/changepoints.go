package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const changePointCols = `id, repo, key, metric, day, good_day, good_sha, bad_sha, good_job_id, bad_job_id,
	mean_before, mean_after, std_before, std_after, change, magnitude, p_value, regression, state,
	issue_number, issue_url, slack_sent, created_at, updated_at`

func scanChangePoint(sc scanner) (ChangePointRecord, error) {
	var (
		c                ChangePointRecord
		day, goodDay     string
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&c.ID, &c.Repo, &c.Key, &c.Metric, &day, &goodDay, &c.GoodSHA, &c.BadSHA, &c.GoodJobID, &c.BadJobID,
		&c.MeanBefore, &c.MeanAfter, &c.StdBefore, &c.StdAfter, &c.Change, &c.Magnitude, &c.PValue, &c.Regression, &c.State,
		&c.IssueNumber, &c.IssueURL, &c.SlackSent, &created, &updated); err != nil {
		return ChangePointRecord{}, err
	}
	var err error
	if c.Day, err = time.Parse(dayFormat, day); err != nil {
		return ChangePointRecord{}, fmt.Errorf("change point %d: day %q: %w", c.ID, day, err)
	}
	if goodDay != "" {
		if c.GoodDay, err = time.Parse(dayFormat, goodDay); err != nil {
			return ChangePointRecord{}, fmt.Errorf("change point %d: good day %q: %w", c.ID, goodDay, err)
		}
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return c, nil
}

func (s *sqlStore) PutChangePoint(ctx context.Context, c ChangePointRecord) (ChangePointRecord, error) {
	if c.Repo == "" || c.Key == "" || c.Metric == "" || c.Day.IsZero() {
		return ChangePointRecord{}, fmt.Errorf("put change point: repo, key, metric and day are required")
	}
	if c.State == "" {
		c.State = ChangePointOpen
	}
	goodDay := ""
	if !c.GoodDay.IsZero() {
		goodDay = c.GoodDay.UTC().Format(dayFormat)
	}
	what := fmt.Sprintf("put change point %s %s %s %s", c.Repo, c.Key, c.Metric, c.Day.UTC().Format(dayFormat))
	now := s.nowMicros()
	args := []any{c.Repo, c.Key, c.Metric, c.Day.UTC().Format(dayFormat), goodDay, c.GoodSHA, c.BadSHA, c.GoodJobID, c.BadJobID,
		c.MeanBefore, c.MeanAfter, c.StdBefore, c.StdAfter, c.Change, c.Magnitude, c.PValue, c.Regression, c.State,
		c.IssueNumber, c.IssueURL, c.SlackSent}
	var (
		out ChangePointRecord
		err error
	)
	if c.ID == 0 {
		out, err = scanChangePoint(s.w.QueryRowContext(ctx, s.q(`INSERT INTO change_points (repo, key, metric, day, good_day,
			good_sha, bad_sha, good_job_id, bad_job_id, mean_before, mean_after, std_before, std_after, change, magnitude,
			p_value, regression, state, issue_number, issue_url, slack_sent, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (repo, key, metric, day) DO NOTHING RETURNING `+changePointCols), append(args, now, now)...))
	} else {
		out, err = scanChangePoint(s.w.QueryRowContext(ctx, s.q(`UPDATE change_points SET repo = ?, key = ?, metric = ?, day = ?,
			good_day = ?, good_sha = ?, bad_sha = ?, good_job_id = ?, bad_job_id = ?, mean_before = ?, mean_after = ?,
			std_before = ?, std_after = ?, change = ?, magnitude = ?, p_value = ?, regression = ?, state = ?,
			issue_number = ?, issue_url = ?, slack_sent = ?, updated_at = ? WHERE id = ? RETURNING `+changePointCols),
			append(args, now, c.ID)...))
		if errors.Is(err, sql.ErrNoRows) {
			return ChangePointRecord{}, fmt.Errorf("%s: id %d: %w", what, c.ID, ErrNotFound)
		}
		if err != nil && isUniqueViolation(err) {
			return ChangePointRecord{}, fmt.Errorf("%s: another record holds that day: %w", what, ErrConflict)
		}
	}
	if c.ID == 0 && errors.Is(err, sql.ErrNoRows) {
		return ChangePointRecord{}, fmt.Errorf("%s: already recorded: %w", what, ErrConflict)
	}
	if err != nil {
		return ChangePointRecord{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// isUniqueViolation recognises both backends' unique-constraint errors.
func isUniqueViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}

func (s *sqlStore) GetChangePoint(ctx context.Context, id int64) (ChangePointRecord, error) {
	c, err := scanChangePoint(s.r.QueryRowContext(ctx, s.q(`SELECT `+changePointCols+` FROM change_points WHERE id = ?`), id))
	if err != nil {
		return ChangePointRecord{}, fmt.Errorf("get change point %d: %w", id, notFound(err))
	}
	return c, nil
}

func (s *sqlStore) ListChangePoints(ctx context.Context, f ChangePointFilter) ([]ChangePointRecord, error) {
	var (
		where []string
		args  []any
	)
	for _, kv := range []struct{ col, v string }{{"repo", f.Repo}, {"key", f.Key}, {"metric", f.Metric}, {"state", f.State}} {
		if kv.v != "" {
			where, args = append(where, kv.col+" = ?"), append(args, kv.v)
		}
	}
	query := `SELECT ` + changePointCols + ` FROM change_points`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY repo, key, metric, day`), args...)
	if err != nil {
		return nil, fmt.Errorf("list change points: %w", err)
	}
	defer rows.Close()
	var out []ChangePointRecord
	for rows.Next() {
		c, err := scanChangePoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list change points: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list change points: %w", err)
	}
	return out, nil
}
