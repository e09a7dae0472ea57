package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const appealCols = `id, repo, pr_number, head_sha, author, reason, status, decided_by, created_at, decided_at`

func scanAppeal(sc scanner) (Appeal, error) {
	var (
		a                Appeal
		status           string
		created, decided sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.Repo, &a.PRNumber, &a.HeadSHA, &a.Author, &a.Reason, &status, &a.DecidedBy,
		&created, &decided); err != nil {
		return Appeal{}, err
	}
	a.Status = AppealStatus(status)
	a.CreatedAt = fromMicros(created)
	a.DecidedAt = fromMicros(decided)
	return a, nil
}

// CreateAppeal records an open appeal.
func (s *sqlStore) CreateAppeal(ctx context.Context, a Appeal) (Appeal, error) {
	if a.Repo == "" || a.PRNumber == 0 || a.Author == "" {
		return Appeal{}, fmt.Errorf("create appeal: repo, PR and author are required")
	}
	out, err := scanAppeal(s.w.QueryRowContext(ctx, s.q(`INSERT INTO appeals
		(repo, pr_number, head_sha, author, reason, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		RETURNING `+appealCols),
		a.Repo, a.PRNumber, a.HeadSHA, a.Author, a.Reason, string(AppealOpen), s.nowMicros()))
	if err != nil {
		return Appeal{}, fmt.Errorf("create appeal on %s#%d: %w", a.Repo, a.PRNumber, err)
	}
	return out, nil
}

func (s *sqlStore) GetAppeal(ctx context.Context, id int64) (Appeal, error) {
	a, err := scanAppeal(s.r.QueryRowContext(ctx, s.q(`SELECT `+appealCols+` FROM appeals WHERE id = ?`), id))
	if err != nil {
		return Appeal{}, fmt.Errorf("get appeal %d: %w", id, notFound(err))
	}
	return a, nil
}

// DecideAppeal accepts or rejects an open appeal; deciding one that is not
// open is ErrConflict (a second maintainer's click does nothing twice).
func (s *sqlStore) DecideAppeal(ctx context.Context, id int64, status AppealStatus, decidedBy string) (Appeal, error) {
	if status != AppealAccepted && status != AppealRejected {
		return Appeal{}, fmt.Errorf("decide appeal %d: status %q: want accepted or rejected", id, status)
	}
	a, err := scanAppeal(s.w.QueryRowContext(ctx, s.q(`UPDATE appeals SET status = ?, decided_by = ?, decided_at = ?
		WHERE id = ? AND status = 'open' RETURNING `+appealCols), string(status), decidedBy, s.nowMicros(), id))
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := s.GetAppeal(ctx, id); gerr != nil {
			return Appeal{}, fmt.Errorf("decide appeal %d: %w", id, ErrNotFound)
		}
		return Appeal{}, fmt.Errorf("decide appeal %d: already decided: %w", id, ErrConflict)
	}
	if err != nil {
		return Appeal{}, fmt.Errorf("decide appeal %d: %w", id, err)
	}
	return a, nil
}

// ListAppeals returns a PR's appeals oldest first.
func (s *sqlStore) ListAppeals(ctx context.Context, repo string, pr int) ([]Appeal, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+appealCols+` FROM appeals WHERE repo = ? AND pr_number = ? ORDER BY id`), repo, pr)
	if err != nil {
		return nil, fmt.Errorf("list appeals %s#%d: %w", repo, pr, err)
	}
	defer rows.Close()
	var out []Appeal
	for rows.Next() {
		a, err := scanAppeal(rows)
		if err != nil {
			return nil, fmt.Errorf("list appeals %s#%d: %w", repo, pr, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list appeals %s#%d: %w", repo, pr, err)
	}
	return out, nil
}
