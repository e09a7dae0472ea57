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

// KnowledgeBase is the record of regressions and their causes (package kb
// matches new regressions against it). Store includes it; it lives in its
// own file beside its migration, 0006.
type KnowledgeBase interface {
	// PutRootCause inserts a record (ID 0) or replaces the one with ID.
	PutRootCause(ctx context.Context, r RootCause) (RootCause, error)
	GetRootCause(ctx context.Context, id int64) (RootCause, error)
	// ListRootCauses returns repo's records, newest first; "" lists every
	// repository's.
	ListRootCauses(ctx context.Context, repo string) ([]RootCause, error)
}

// RootCause is one finding: a regression's phenomenon, the commit that
// caused it, why, and the fix.
type RootCause struct {
	ID     int64
	Repo   string
	Number int    // the PR or issue where it was recorded (#123)
	URL    string // a link to it
	// Commit is the culprit's SHA and CulpritPR the PR that merged it.
	Commit    string
	CulpritPR int
	Summary   string // the phenomenon, one line: "prefill interrupts decode"
	Cause     string // "scheduler priority change"
	FixURL    string
	// Signature is kb.Signature as JSON: which metrics moved and the
	// profile-diff fingerprint. The store keeps it as given.
	Signature            json.RawMessage
	RecordedBy           string
	CreatedAt, UpdatedAt time.Time
}

const rootCauseCols = `id, repo, number, url, commit_sha, culprit_pr, summary, cause, fix_url, signature, recorded_by, created_at, updated_at`

func scanRootCause(sc scanner) (RootCause, error) {
	var (
		r                RootCause
		sig              string
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.Repo, &r.Number, &r.URL, &r.Commit, &r.CulpritPR, &r.Summary, &r.Cause, &r.FixURL,
		&sig, &r.RecordedBy, &created, &updated); err != nil {
		return RootCause{}, err
	}
	r.Signature = parseDoc(sig)
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	return r, nil
}

func (s *sqlStore) PutRootCause(ctx context.Context, r RootCause) (RootCause, error) {
	what := fmt.Sprintf("put root cause of %s", r.Repo)
	if r.Repo == "" || strings.TrimSpace(r.Cause) == "" || r.RecordedBy == "" {
		return RootCause{}, fmt.Errorf("%s: repo, cause and who recorded it are required", what)
	}
	sig, err := jsonDoc(r.Signature)
	if err != nil {
		return RootCause{}, fmt.Errorf("%s: signature: %w", what, err)
	}
	now := s.nowMicros()
	args := []any{r.Repo, r.Number, r.URL, r.Commit, r.CulpritPR, r.Summary, r.Cause, r.FixURL, sig, r.RecordedBy}
	var out RootCause
	if r.ID == 0 {
		out, err = scanRootCause(s.w.QueryRowContext(ctx, s.q(`INSERT INTO root_causes (repo, number, url, commit_sha,
			culprit_pr, summary, cause, fix_url, signature, recorded_by, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+rootCauseCols), append(args, now, now)...))
	} else {
		out, err = scanRootCause(s.w.QueryRowContext(ctx, s.q(`UPDATE root_causes SET repo = ?, number = ?, url = ?,
			commit_sha = ?, culprit_pr = ?, summary = ?, cause = ?, fix_url = ?, signature = ?, recorded_by = ?,
			updated_at = ? WHERE id = ? RETURNING `+rootCauseCols), append(args, now, r.ID)...))
		if errors.Is(err, sql.ErrNoRows) {
			return RootCause{}, fmt.Errorf("%s: id %d: %w", what, r.ID, ErrNotFound)
		}
	}
	if err != nil {
		return RootCause{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) GetRootCause(ctx context.Context, id int64) (RootCause, error) {
	r, err := scanRootCause(s.r.QueryRowContext(ctx, s.q(`SELECT `+rootCauseCols+` FROM root_causes WHERE id = ?`), id))
	if err != nil {
		return RootCause{}, fmt.Errorf("get root cause %d: %w", id, notFound(err))
	}
	return r, nil
}

func (s *sqlStore) ListRootCauses(ctx context.Context, repo string) ([]RootCause, error) {
	query, args := `SELECT `+rootCauseCols+` FROM root_causes`, []any{}
	if repo != "" {
		query, args = query+` WHERE repo = ?`, append(args, repo)
	}
	rows, err := s.r.QueryContext(ctx, s.q(query+` ORDER BY id DESC`), args...)
	if err != nil {
		return nil, fmt.Errorf("list root causes: %w", err)
	}
	defer rows.Close()
	var out []RootCause
	for rows.Next() {
		r, err := scanRootCause(rows)
		if err != nil {
			return nil, fmt.Errorf("list root causes: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list root causes: %w", err)
	}
	return out, nil
}
