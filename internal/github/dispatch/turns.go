package dispatch

import (
	"context"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// Every replica schedules the same periodic jobs; each runs in the one
// replica that takes its turn for the period (store.Singletons), so two
// replicas post one round of queue notes and queue the nightlies once.
const (
	TurnNightly    = "nightly"
	TurnQueueNotes = "queue-notes"
	TurnStartSync  = "start-sync"
)

// nightlyHold is how long a nightly turn is held: longer than queueing
// every repository's nightly takes.
const nightlyHold = time.Hour

// inTurn runs fn if this replica takes name's turn for period, holding it
// for hold, and marks the turn done when fn succeeds. It reports whether
// fn ran here.
func (s *Service) inTurn(ctx context.Context, name string, period time.Time, hold time.Duration, fn func(context.Context) error) (bool, error) {
	ok, err := s.timing().TakeTurn(ctx, name, period, hold)
	if err != nil || !ok {
		return false, err
	}
	zerolog.Ctx(ctx).Debug().Str("turn", name).Time("period", period).Msg("this replica's turn")
	if err := fn(ctx); err != nil {
		return true, err
	}
	return true, s.timing().TurnDone(ctx, name, period)
}

// NightlyTurn queues the nightly of every repository for the run
// scheduled at at (the cron's firing time, the same in every replica), if
// this replica takes the turn; it reports whether it did.
func (s *Service) NightlyTurn(ctx context.Context, at time.Time, repos []string, clients githubapp.ClientCreator) (bool, error) {
	return s.nightlyTurn(ctx, &nightlyRuns{s: s, clients: clients}, at, repos)
}

func (s *Service) nightlyTurn(ctx context.Context, n *nightlyRuns, at time.Time, repos []string) (bool, error) {
	// Replicas' clocks differ by a little: the minute the cron fired.
	return s.inTurn(ctx, TurnNightly, at.Round(time.Minute), nightlyHold, func(ctx context.Context) error {
		n.run(ctx, repos)
		return nil
	})
}

// QueueNotesTurn updates the queue notes of the period of length every
// that at falls in, if this replica takes the turn.
func (s *Service) QueueNotesTurn(ctx context.Context, at time.Time, every time.Duration) (bool, error) {
	return s.inTurn(ctx, TurnQueueNotes, at.Truncate(every), every, s.UpdateQueueNotes)
}
