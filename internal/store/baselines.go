package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const baselineCols = `id, repo, key, version, commit_sha, image_digest, gpu, gpu_uuid, driver,
	load_params, runs, promoted_by, reason, allow_lower, created_at`

func scanBaseline(sc scanner) (Baseline, error) {
	var (
		b          Baseline
		load, runs string
		created    sql.NullInt64
	)
	if err := sc.Scan(&b.ID, &b.Repo, &b.Key, &b.Version, &b.Commit, &b.ImageDigest, &b.GPU, &b.GPUUUID,
		&b.Driver, &load, &runs, &b.PromotedBy, &b.Reason, &b.AllowLower, &created); err != nil {
		return Baseline{}, err
	}
	b.LoadParams = parseDoc(load)
	b.Runs = parseDoc(runs)
	b.CreatedAt = fromMicros(created)
	return b, nil
}

// PutBaseline records a new baseline version. Version 0 takes the next
// number for (Repo, Key); a version already taken is ErrConflict, so two
// concurrent promotions cannot both become "latest" silently.
func (s *sqlStore) PutBaseline(ctx context.Context, b Baseline) (Baseline, error) {
	var out Baseline
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.putBaselineTx(ctx, tx, b, s.nowMicros())
		return err
	})
	if err != nil {
		return Baseline{}, fmt.Errorf("put baseline %s %s: %w", b.Repo, b.Key, err)
	}
	return out, nil
}

// putBaselineTx inserts b in transaction tx (PutBaseline, or a check's
// step that promotes it): version 0 takes the next number, a version
// already taken is ErrConflict.
func (s *sqlStore) putBaselineTx(ctx context.Context, tx *sql.Tx, b Baseline, now int64) (Baseline, error) {
	if b.Repo == "" || b.Key == "" {
		return Baseline{}, fmt.Errorf("repo and key are required")
	}
	load, err := jsonDoc(b.LoadParams)
	if err != nil {
		return Baseline{}, fmt.Errorf("load params: %w", err)
	}
	runs, err := jsonDoc(b.Runs)
	if err != nil {
		return Baseline{}, fmt.Errorf("runs: %w", err)
	}
	version := b.Version
	if version == 0 {
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(version), 0) + 1 FROM baselines WHERE repo = ? AND key = ?`),
			b.Repo, b.Key).Scan(&version); err != nil {
			return Baseline{}, fmt.Errorf("next version: %w", err)
		}
	}
	out, err := scanBaseline(tx.QueryRowContext(ctx, s.q(`INSERT INTO baselines
		(repo, key, version, commit_sha, image_digest, gpu, gpu_uuid, driver, load_params, runs,
		 promoted_by, reason, allow_lower, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo, key, version) DO NOTHING
		RETURNING `+baselineCols),
		b.Repo, b.Key, version, b.Commit, b.ImageDigest, b.GPU, b.GPUUUID, b.Driver, load, runs,
		b.PromotedBy, b.Reason, b.AllowLower, now))
	if errors.Is(err, sql.ErrNoRows) {
		return Baseline{}, fmt.Errorf("version %d already exists: %w", version, ErrConflict)
	}
	return out, err
}

func (s *sqlStore) GetBaseline(ctx context.Context, id int64) (Baseline, error) {
	b, err := scanBaseline(s.r.QueryRowContext(ctx, s.q(`SELECT `+baselineCols+` FROM baselines WHERE id = ?`), id))
	if err != nil {
		return Baseline{}, fmt.Errorf("get baseline %d: %w", id, notFound(err))
	}
	return b, nil
}

// LatestBaseline is the highest version for (repo, key), or ErrNotFound.
func (s *sqlStore) LatestBaseline(ctx context.Context, repo, key string) (Baseline, error) {
	b, err := scanBaseline(s.r.QueryRowContext(ctx, s.q(`SELECT `+baselineCols+` FROM baselines
		WHERE repo = ? AND key = ? ORDER BY version DESC LIMIT 1`), repo, key))
	if err != nil {
		return Baseline{}, fmt.Errorf("latest baseline %s %s: %w", repo, key, notFound(err))
	}
	return b, nil
}

// ListBaselines returns the latest version of every key in repo, by key.
func (s *sqlStore) ListBaselines(ctx context.Context, repo string) ([]Baseline, error) {
	return s.queryBaselines(ctx, fmt.Sprintf("list baselines %s", repo), `SELECT `+baselineCols+` FROM baselines b
		WHERE repo = ? AND version = (SELECT MAX(version) FROM baselines m WHERE m.repo = b.repo AND m.key = b.key)
		ORDER BY key`, repo)
}

// BaselineHistory returns every version for (repo, key), newest first.
func (s *sqlStore) BaselineHistory(ctx context.Context, repo, key string) ([]Baseline, error) {
	return s.queryBaselines(ctx, fmt.Sprintf("baseline history %s %s", repo, key), `SELECT `+baselineCols+` FROM baselines
		WHERE repo = ? AND key = ? ORDER BY version DESC`, repo, key)
}

func (s *sqlStore) queryBaselines(ctx context.Context, what, query string, args ...any) ([]Baseline, error) {
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []Baseline
	for rows.Next() {
		b, err := scanBaseline(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
