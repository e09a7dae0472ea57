package store

import (
	"context"
	"fmt"
	"time"
)

// Sessions are the dashboard's sign-ins (migration 0016): in the database,
// so a restart keeps people signed in and every replica serves every
// session. The store never sees a session's id, only its SHA-256
// (TokenHash), nor the person's GitHub token, only the dashboard's sealed
// copy of it. Times are the caller's: the dashboard's clock decides expiry.
type Sessions interface {
	// CreateSession stores a new session under tokenHash.
	CreateSession(ctx context.Context, tokenHash string, s Session) (Session, error)
	// SessionByToken finds the live session whose current id hashes to
	// tokenHash, or whose previous id does while its grace lasts (until
	// after now). ErrNotFound when none: unknown, expired, rotated away
	// or signed out.
	SessionByToken(ctx context.Context, tokenHash string, now time.Time) (Session, error)
	// RotateSession gives session id the new id newHash if oldHash is
	// still its current one, keeping oldHash valid until graceUntil. It
	// reports false when another request (another replica) rotated it
	// first or the session is gone.
	RotateSession(ctx context.Context, id int64, oldHash, newHash string, now, graceUntil time.Time) (bool, error)
	// DeleteSession ends a session (sign-out, a revoked token).
	DeleteSession(ctx context.Context, id int64) error
	// PurgeSessions deletes the sessions expired at now and reports how
	// many.
	PurgeSessions(ctx context.Context, now time.Time) (int64, error)
}

// Session is one signed-in browser.
type Session struct {
	ID    int64
	Login string
	// TokenSealed is the person's GitHub token as the dashboard sealed it.
	TokenSealed []byte
	CreatedAt   time.Time
	// RotatedAt is when the current id was issued.
	RotatedAt time.Time
	ExpiresAt time.Time
}

const sessionCols = `id, login, token_sealed, created_at, rotated_at, expires_at`

func scanSession(r scanner) (Session, error) {
	var (
		s                         Session
		created, rotated, expires int64
	)
	if err := r.Scan(&s.ID, &s.Login, &s.TokenSealed, &created, &rotated, &expires); err != nil {
		return Session{}, err
	}
	s.CreatedAt, s.RotatedAt, s.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(rotated).UTC(), time.UnixMicro(expires).UTC()
	return s, nil
}

func (s *sqlStore) CreateSession(ctx context.Context, tokenHash string, in Session) (Session, error) {
	if tokenHash == "" || in.Login == "" || len(in.TokenSealed) == 0 {
		return Session{}, fmt.Errorf("create session: a token hash, a login and a sealed token are required")
	}
	out, err := scanSession(s.w.QueryRowContext(ctx, s.q(`INSERT INTO web_sessions
		(token_hash, login, token_sealed, created_at, rotated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
		RETURNING `+sessionCols), tokenHash, in.Login, in.TokenSealed, in.CreatedAt.UnixMicro(), in.CreatedAt.UnixMicro(), in.ExpiresAt.UnixMicro()))
	if err != nil {
		return Session{}, fmt.Errorf("create session for %s: %w", in.Login, err)
	}
	return out, nil
}

func (s *sqlStore) SessionByToken(ctx context.Context, tokenHash string, now time.Time) (Session, error) {
	at := now.UnixMicro()
	out, err := scanSession(s.r.QueryRowContext(ctx, s.q(`SELECT `+sessionCols+` FROM web_sessions
		WHERE (token_hash = ? OR (prev_hash = ? AND prev_until > ?)) AND expires_at > ?`), tokenHash, tokenHash, at, at))
	if err != nil {
		return Session{}, fmt.Errorf("session by token: %w", notFound(err))
	}
	return out, nil
}

func (s *sqlStore) RotateSession(ctx context.Context, id int64, oldHash, newHash string, now, graceUntil time.Time) (bool, error) {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE web_sessions SET prev_hash = token_hash, prev_until = ?, token_hash = ?, rotated_at = ?
		WHERE id = ? AND token_hash = ? AND expires_at > ?`), graceUntil.UnixMicro(), newHash, now.UnixMicro(), id, oldHash, now.UnixMicro())
	if err != nil {
		return false, fmt.Errorf("rotate session %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("rotate session %d: %w", id, err)
	}
	return n == 1, nil
}

func (s *sqlStore) DeleteSession(ctx context.Context, id int64) error {
	if _, err := s.w.ExecContext(ctx, s.q(`DELETE FROM web_sessions WHERE id = ?`), id); err != nil {
		return fmt.Errorf("delete session %d: %w", id, err)
	}
	return nil
}

func (s *sqlStore) PurgeSessions(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM web_sessions WHERE expires_at <= ?`), now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("purge expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge expired sessions: %w", err)
	}
	return n, nil
}
