package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bisects keeps the bisects perfgate runs (package bisect's State, as JSON)
// between GPU jobs and across restarts. Store includes it.
type Bisects interface {
	// CreateBisect records a running bisect. A second running bisect of the
	// same repository, range and metric, or a second bisect waiting for the
	// same job, is ErrConflict.
	CreateBisect(ctx context.Context, b BisectRecord) (BisectRecord, error)
	GetBisect(ctx context.Context, id int64) (BisectRecord, error)
	// UpdateBisect stores a new state, status and pending job if the record
	// is still at version; a record another replica moved on is ErrConflict
	// (reload and apply the event again).
	UpdateBisect(ctx context.Context, id int64, version int, u BisectUpdate) (BisectRecord, error)
	// BisectByJob returns the bisect whose pending request job jobID
	// measures: what a finished job of kind "bisect" reports to.
	BisectByJob(ctx context.Context, jobID int64) (BisectRecord, error)
	// ListBisects returns the bisects the filter selects, oldest first.
	ListBisects(ctx context.Context, f BisectFilter) ([]BisectRecord, error)
}

// Bisect statuses.
const (
	BisectRunning = "running"
	BisectDone    = "done"
	BisectFailed  = "failed" // stopped by an error a person must look at
)

// BisectRecord is one bisect and where to report it.
type BisectRecord struct {
	ID             int64
	Repo           string
	GoodSHA        string
	BadSHA         string
	Metric         string
	RequestedBy    string // a login, or "changepoint"
	Number         int    // the PR or issue to report to; 0 for none
	ChangePointID  int64  // the change point that started it; 0 for none
	InstallationID int64
	Status         string
	State          json.RawMessage // bisect.State
	JobID          int64           // the job measuring the pending request; 0 for none
	Version        int
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// BisectUpdate is what UpdateBisect changes.
type BisectUpdate struct {
	Status string // BisectRunning, BisectDone or BisectFailed
	State  json.RawMessage
	JobID  int64 // the job measuring the new pending request; 0 for none
}

// BisectFilter selects bisects; zero fields match all.
type BisectFilter struct {
	Repo   string
	Status string
}

const bisectCols = `id, repo, good_sha, bad_sha, metric, requested_by, number, change_point_id, installation_id,
	status, state, job_id, version, created_at, updated_at`

func scanBisect(sc scanner) (BisectRecord, error) {
	var (
		b                BisectRecord
		state            string
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&b.ID, &b.Repo, &b.GoodSHA, &b.BadSHA, &b.Metric, &b.RequestedBy, &b.Number, &b.ChangePointID,
		&b.InstallationID, &b.Status, &state, &b.JobID, &b.Version, &created, &updated); err != nil {
		return BisectRecord{}, err
	}
	b.State = json.RawMessage(state)
	b.CreatedAt, b.UpdatedAt = fromMicros(created), fromMicros(updated)
	return b, nil
}

func (s *sqlStore) CreateBisect(ctx context.Context, b BisectRecord) (BisectRecord, error) {
	what := fmt.Sprintf("create bisect %s %.7s..%.7s %s", b.Repo, b.GoodSHA, b.BadSHA, b.Metric)
	if b.Repo == "" || b.GoodSHA == "" || b.BadSHA == "" || b.Metric == "" {
		return BisectRecord{}, fmt.Errorf("%s: repo, good and bad commits and metric are required", what)
	}
	if len(b.State) == 0 || !json.Valid(b.State) {
		return BisectRecord{}, fmt.Errorf("%s: the state is not a JSON document", what)
	}
	now := s.nowMicros()
	out, err := scanBisect(s.w.QueryRowContext(ctx, s.q(`INSERT INTO bisects (repo, good_sha, bad_sha, metric, requested_by,
		number, change_point_id, installation_id, status, state, job_id, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING `+bisectCols),
		b.Repo, b.GoodSHA, b.BadSHA, b.Metric, b.RequestedBy, b.Number, b.ChangePointID, b.InstallationID,
		BisectRunning, string(b.State), b.JobID, now, now))
	if err != nil && isUniqueViolation(err) {
		return BisectRecord{}, fmt.Errorf("%s: one is already running, or another waits for job %d: %w", what, b.JobID, ErrConflict)
	}
	if err != nil {
		return BisectRecord{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) GetBisect(ctx context.Context, id int64) (BisectRecord, error) {
	b, err := scanBisect(s.r.QueryRowContext(ctx, s.q(`SELECT `+bisectCols+` FROM bisects WHERE id = ?`), id))
	if err != nil {
		return BisectRecord{}, fmt.Errorf("get bisect %d: %w", id, notFound(err))
	}
	return b, nil
}

func (s *sqlStore) UpdateBisect(ctx context.Context, id int64, version int, u BisectUpdate) (BisectRecord, error) {
	what := fmt.Sprintf("update bisect %d", id)
	switch u.Status {
	case BisectRunning, BisectDone, BisectFailed:
	default:
		return BisectRecord{}, fmt.Errorf("%s: status %q: want running, done or failed", what, u.Status)
	}
	if len(u.State) == 0 || !json.Valid(u.State) {
		return BisectRecord{}, fmt.Errorf("%s: the state is not a JSON document", what)
	}
	b, err := scanBisect(s.w.QueryRowContext(ctx, s.q(`UPDATE bisects SET status = ?, state = ?, job_id = ?,
		version = version + 1, updated_at = ? WHERE id = ? AND version = ? RETURNING `+bisectCols),
		u.Status, string(u.State), u.JobID, s.nowMicros(), id, version))
	if errors.Is(err, sql.ErrNoRows) {
		cur, gerr := s.GetBisect(ctx, id)
		if gerr != nil {
			return BisectRecord{}, fmt.Errorf("%s: %w", what, gerr)
		}
		return BisectRecord{}, fmt.Errorf("%s: at version %d, not %d: %w", what, cur.Version, version, ErrConflict)
	}
	if err != nil && isUniqueViolation(err) {
		return BisectRecord{}, fmt.Errorf("%s: another bisect waits for job %d: %w", what, u.JobID, ErrConflict)
	}
	if err != nil {
		return BisectRecord{}, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

func (s *sqlStore) BisectByJob(ctx context.Context, jobID int64) (BisectRecord, error) {
	if jobID == 0 {
		return BisectRecord{}, fmt.Errorf("bisect of job 0: %w", ErrNotFound)
	}
	b, err := scanBisect(s.r.QueryRowContext(ctx, s.q(`SELECT `+bisectCols+` FROM bisects WHERE job_id = ?`), jobID))
	if err != nil {
		return BisectRecord{}, fmt.Errorf("bisect of job %d: %w", jobID, notFound(err))
	}
	return b, nil
}

func (s *sqlStore) ListBisects(ctx context.Context, f BisectFilter) ([]BisectRecord, error) {
	var (
		where []string
		args  []any
	)
	for _, kv := range []struct{ col, v string }{{"repo", f.Repo}, {"status", f.Status}} {
		if kv.v != "" {
			where, args = append(where, kv.col+" = ?"), append(args, kv.v)
		}
	}
	query := `SELECT ` + bisectCols + ` FROM bisects`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("list bisects: %w", err)
	}
	defer rows.Close()
	var out []BisectRecord
	for rows.Next() {
		b, err := scanBisect(rows)
		if err != nil {
			return nil, fmt.Errorf("list bisects: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list bisects: %w", err)
	}
	return out, nil
}
