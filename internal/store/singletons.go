package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Singletons are the periodic jobs every replica schedules but only one
// may run per period, and the clocks they share (migration 0012).
type Singletons interface {
	// TakeTurn takes the turn of the periodic job name for period (its
	// scheduled time, the same in every replica) and holds it until
	// hold has passed. It reports whether this caller took it: no other
	// took this period, or the one that did let its hold lapse without
	// finishing (its replica died). A later period is always free.
	TakeTurn(ctx context.Context, name string, period time.Time, hold time.Duration) (bool, error)
	// TurnDone marks the turn this caller took as finished, so it is
	// not taken again when the hold lapses.
	TurnDone(ctx context.Context, name string, period time.Time) error
	// CardMissingSince returns when card was first recorded missing from
	// every runner, recording now if it was not.
	CardMissingSince(ctx context.Context, card string) (time.Time, error)
	// CardSeen forgets that card was missing.
	CardSeen(ctx context.Context, card string) error
}

func (s *sqlStore) TakeTurn(ctx context.Context, name string, period time.Time, hold time.Duration) (bool, error) {
	now := s.now()
	var holder string
	err := s.w.QueryRowContext(ctx, s.q(`INSERT INTO singleton_turns (name, period, holder, until, done) VALUES (?, ?, ?, ?, FALSE)
		ON CONFLICT (name) DO UPDATE SET period = excluded.period, holder = excluded.holder, until = excluded.until, done = FALSE
		WHERE singleton_turns.period < excluded.period
			OR (singleton_turns.period = excluded.period AND NOT singleton_turns.done AND singleton_turns.until < ?)
		RETURNING holder`), name, period.UnixMicro(), s.turnHolder(), now.Add(hold).UnixMicro(), now.UnixMicro()).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take the %s turn of %s: %w", name, period.UTC().Format(time.RFC3339), err)
	}
	return true, nil
}

func (s *sqlStore) TurnDone(ctx context.Context, name string, period time.Time) error {
	if _, err := s.w.ExecContext(ctx, s.q(`UPDATE singleton_turns SET done = TRUE WHERE name = ? AND period = ? AND holder = ?`),
		name, period.UnixMicro(), s.turnHolder()); err != nil {
		return fmt.Errorf("finish the %s turn: %w", name, err)
	}
	return nil
}

// turnHolder names this store handle: its instance and a random id, so
// two handles of one process (tests' replicas) are two holders.
func (s *sqlStore) turnHolder() string {
	s.holderOnce.Do(func() {
		id, err := s.serverLeaseID()
		if err != nil {
			id = fmt.Sprintf("%s/%p", s.instance, s)
		}
		s.holder = id
	})
	return s.holder
}

func (s *sqlStore) CardMissingSince(ctx context.Context, card string) (time.Time, error) {
	var since int64
	err := s.w.QueryRowContext(ctx, s.q(`INSERT INTO cards_missing (card, since) VALUES (?, ?)
		ON CONFLICT (card) DO UPDATE SET since = cards_missing.since RETURNING since`), card, s.nowMicros()).Scan(&since)
	if err != nil {
		return time.Time{}, fmt.Errorf("card %s missing since: %w", card, err)
	}
	return time.UnixMicro(since).UTC(), nil
}

func (s *sqlStore) CardSeen(ctx context.Context, card string) error {
	if _, err := s.w.ExecContext(ctx, s.q(`DELETE FROM cards_missing WHERE card = ?`), card); err != nil {
		return fmt.Errorf("card %s seen: %w", card, err)
	}
	return nil
}
