package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Artifacts are the files runners upload for a job — the trace files of a
// profiling pass — kept by the server in its artifact directory under
// their SHA-256; the store keeps whose they are (migration 0009).
type Artifacts interface {
	// PutArtifact records an uploaded file under the job's current lease
	// (ErrLeaseLost otherwise). The same side and name uploaded again in
	// the attempt replaces the row: a retried upload stores once.
	PutArtifact(ctx context.Context, a ArtifactUpload) (Artifact, error)
	GetArtifact(ctx context.Context, id int64) (Artifact, error)
	// ListArtifacts returns the job's artifacts of its latest attempt, in
	// upload order.
	ListArtifacts(ctx context.Context, jobID int64) ([]Artifact, error)
	// DeleteArtifactsBefore deletes the rows created before the cutoff
	// and returns them; ArtifactSHA256s is the set of files the remaining
	// rows reference (the retention sweep keeps those).
	DeleteArtifactsBefore(ctx context.Context, before time.Time) ([]Artifact, error)
	ArtifactSHA256s(ctx context.Context) (map[string]bool, error)
}

// ArtifactUpload is a file a runner uploaded.
type ArtifactUpload struct {
	JobID   int64
	LeaseID string
	Side    string // agentapi.SideBase, SideHead or ""
	SHA     string // the commit the file is about
	Name    string
	Size    int64
	SHA256  string
}

// Artifact is a stored artifact's row.
type Artifact struct {
	ID        int64
	JobID     int64
	Attempt   int
	Repo      string
	SHA       string
	Side      string
	Name      string
	Size      int64
	SHA256    string
	CreatedAt time.Time
}

const artifactCols = `id, job_id, attempt, repo, sha, side, name, size, sha256, created_at`

func scanArtifact(sc scanner) (Artifact, error) {
	var (
		a       Artifact
		created sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.JobID, &a.Attempt, &a.Repo, &a.SHA, &a.Side, &a.Name, &a.Size, &a.SHA256, &created); err != nil {
		return Artifact{}, err
	}
	a.CreatedAt = fromMicros(created)
	return a, nil
}

func (s *sqlStore) PutArtifact(ctx context.Context, up ArtifactUpload) (Artifact, error) {
	what := fmt.Sprintf("put artifact %q of job %d", up.Name, up.JobID)
	if up.Name == "" || up.SHA256 == "" || up.Size < 0 {
		return Artifact{}, fmt.Errorf("%s: name, size and sha256 are required", what)
	}
	var out Artifact
	err := s.tx(ctx, func(tx *sql.Tx) error {
		attempt, _, err := s.currentLease(ctx, tx, up.JobID, up.LeaseID)
		if err != nil {
			return err
		}
		var repo string
		if err := tx.QueryRowContext(ctx, s.q(`SELECT repo FROM jobs WHERE id = ?`), up.JobID).Scan(&repo); err != nil {
			return err
		}
		out, err = scanArtifact(tx.QueryRowContext(ctx, s.q(`INSERT INTO artifacts
			(job_id, attempt, repo, sha, side, name, size, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (job_id, attempt, side, name) DO UPDATE SET sha = excluded.sha, size = excluded.size,
			sha256 = excluded.sha256, created_at = excluded.created_at
			RETURNING `+artifactCols), up.JobID, attempt, repo, up.SHA, up.Side, up.Name, up.Size, up.SHA256, s.nowMicros()))
		return err
	})
	if errors.Is(err, ErrLeaseLost) {
		return Artifact{}, ErrLeaseLost
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) GetArtifact(ctx context.Context, id int64) (Artifact, error) {
	a, err := scanArtifact(s.r.QueryRowContext(ctx, s.q(`SELECT `+artifactCols+` FROM artifacts WHERE id = ?`), id))
	if err != nil {
		return Artifact{}, fmt.Errorf("get artifact %d: %w", id, notFound(err))
	}
	return a, nil
}

func (s *sqlStore) ListArtifacts(ctx context.Context, jobID int64) ([]Artifact, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+artifactCols+` FROM artifacts WHERE job_id = ?
		AND attempt = (SELECT MAX(attempt) FROM artifacts WHERE job_id = ?) ORDER BY id`), jobID, jobID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of job %d: %w", jobID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list artifacts of job %d: %w", jobID, err)
	}
	return out, nil
}

// DeleteArtifactsBefore deletes the artifact rows created before the
// cutoff (the server's artifacts.keep) and returns them, so the caller can
// say what it freed. The files are the caller's: one may be shared by a
// newer row (ArtifactSHA256s).
func (s *sqlStore) DeleteArtifactsBefore(ctx context.Context, before time.Time) ([]Artifact, error) {
	rows, err := s.w.QueryContext(ctx, s.q(`DELETE FROM artifacts WHERE created_at < ? RETURNING `+artifactCols), before.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("delete artifacts before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("delete artifacts before %s: %w", before.UTC().Format(time.RFC3339), err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("delete artifacts before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}

// ArtifactSHA256s returns the SHA-256 of every file a row references: the
// files the artifact directory must keep.
func (s *sqlStore) ArtifactSHA256s(ctx context.Context) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT sha256 FROM artifacts`)
	if err != nil {
		return nil, fmt.Errorf("list artifact files: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var sum string
		if err := rows.Scan(&sum); err != nil {
			return nil, fmt.Errorf("list artifact files: %w", err)
		}
		out[sum] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list artifact files: %w", err)
	}
	return out, nil
}
