package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// SyncStarted moves the check runs of jobs an agent has claimed from
// queued to in_progress. It polls the store rather than hooking the claim,
// so it works whichever replica handed out the job; the step is a
// compare-and-set, so one replica makes each. It reads only the running
// jobs whose check still shows queued (RunningQueuedChecks), not every
// running job with its plan.
func (s *Service) SyncStarted(ctx context.Context) error {
	ids, err := s.timing().RunningQueuedChecks(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		j, err := s.timing().GetJob(ctx, id)
		if err != nil {
			return err
		}
		if j.Status != jobstate.Running {
			continue // ended meanwhile
		}
		cr, ok, err := s.checkOf(ctx, j)
		if err != nil || !ok || cr.State != store.CheckQueued {
			continue
		}
		what := "Measuring"
		if j.Kind == kindBaseline {
			what = "Measuring the baseline"
		}
		if _, _, err := s.apply(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.Started},
			out: check.Output{Title: what, Summary: fmt.Sprintf("A runner is benchmarking `%s` (%s tier, attempt %d).", rev.Short(j.HeadSHA), j.Tier, j.Attempts)}}); err != nil && !errors.Is(err, errIgnored) {
			return err
		}
	}
	return nil
}

// RunStartSync calls SyncStarted every interval until ctx ends, in the
// replica that takes the interval's turn.
func (s *Service) RunStartSync(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "sync started jobs", func(ctx context.Context) error {
		_, err := s.StartSyncTurn(ctx, s.now(), every)
		return err
	})
}

// StartSyncTurn syncs the started checks of the period of length every
// that at falls in, if this replica takes the turn: one replica a period,
// not every replica every tick.
func (s *Service) StartSyncTurn(ctx context.Context, at time.Time, every time.Duration) (bool, error) {
	return s.inTurn(ctx, TurnStartSync, at.Truncate(every), every, s.SyncStarted)
}
