package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

const auditCols = `id, actor, action, repo, pr_number, detail, created_at`

// execer is what insertAudit needs: a transaction or the write pool.
type execer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func insertAudit(ctx context.Context, s *sqlStore, ex execer, e AuditEntry, now int64) error {
	_, err := insertAuditRow(ctx, s, ex, e, now)
	return err
}

func insertAuditRow(ctx context.Context, s *sqlStore, ex execer, e AuditEntry, now int64) (AuditEntry, error) {
	detail, err := jsonDoc(e.Detail)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit %s: detail: %w", e.Action, err)
	}
	var (
		out     AuditEntry
		d       string
		created sql.NullInt64
	)
	err = ex.QueryRowContext(ctx, s.q(`INSERT INTO audit_log (actor, action, repo, pr_number, detail, created_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING `+auditCols), e.Actor, e.Action, e.Repo, e.PRNumber, detail, now).
		Scan(&out.ID, &out.Actor, &out.Action, &out.Repo, &out.PRNumber, &d, &created)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit %s: %w", e.Action, err)
	}
	out.Detail = parseDoc(d)
	out.CreatedAt = fromMicros(created)
	return out, nil
}

// AppendAudit adds one entry to the audit log.
func (s *sqlStore) AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	if e.Actor == "" || e.Action == "" {
		return AuditEntry{}, fmt.Errorf("append audit: actor and action are required")
	}
	return insertAuditRow(ctx, s, s.w, e, s.nowMicros())
}

// ListAudit returns the entries for one PR, or for the whole repo when pr
// is 0, oldest first.
func (s *sqlStore) ListAudit(ctx context.Context, repo string, pr int) ([]AuditEntry, error) {
	query, args := `SELECT `+auditCols+` FROM audit_log WHERE repo = ?`, []any{repo}
	if pr != 0 {
		query, args = query+` AND pr_number = ?`, append(args, pr)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e       AuditEntry
			d       string
			created sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.Actor, &e.Action, &e.Repo, &e.PRNumber, &d, &created); err != nil {
			return nil, fmt.Errorf("list audit %s#%d: %w", repo, pr, err)
		}
		e.Detail = parseDoc(d)
		e.CreatedAt = fromMicros(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit %s#%d: %w", repo, pr, err)
	}
	return out, nil
}

const dayFormat = "2006-01-02"

// PutTrend stores one nightly point, replacing the same day's value.
func (s *sqlStore) PutTrend(ctx context.Context, p TrendPoint) error {
	return s.putTrend(ctx, s.w, p)
}

// putTrend stores p through ex (the database, or a check step's
// transaction).
func (s *sqlStore) putTrend(ctx context.Context, ex txer, p TrendPoint) error {
	if p.Repo == "" || p.Metric == "" || p.Date.IsZero() {
		return fmt.Errorf("put trend: repo, metric and date are required")
	}
	_, err := ex.ExecContext(ctx, s.q(`INSERT INTO trend_points (repo, key, metric, day, value, job_id)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, key, metric, day) DO UPDATE SET value = excluded.value, job_id = excluded.job_id`),
		p.Repo, p.Key, p.Metric, p.Date.UTC().Format(dayFormat), p.Value, p.JobID)
	if err != nil {
		return fmt.Errorf("put trend %s %s %s: %w", p.Repo, p.Key, p.Metric, err)
	}
	return nil
}

// ListTrend returns one metric's points from since's day on, oldest first.
func (s *sqlStore) ListTrend(ctx context.Context, repo, key, metric string, since time.Time) ([]TrendPoint, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT day, value, job_id FROM trend_points
		WHERE repo = ? AND key = ? AND metric = ? AND day >= ? ORDER BY day`),
		repo, key, metric, since.UTC().Format(dayFormat))
	if err != nil {
		return nil, fmt.Errorf("list trend %s %s %s: %w", repo, key, metric, err)
	}
	defer rows.Close()
	var out []TrendPoint
	for rows.Next() {
		p := TrendPoint{Repo: repo, Key: key, Metric: metric}
		var day string
		if err := rows.Scan(&day, &p.Value, &p.JobID); err != nil {
			return nil, fmt.Errorf("list trend %s %s %s: %w", repo, key, metric, err)
		}
		if p.Date, err = time.Parse(dayFormat, day); err != nil {
			return nil, fmt.Errorf("list trend %s %s %s: day %q: %w", repo, key, metric, day, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list trend %s %s %s: %w", repo, key, metric, err)
	}
	return out, nil
}
