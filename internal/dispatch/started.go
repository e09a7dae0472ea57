package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/check"
	"github.com/perfgate/perfgate/internal/checkstate"
	"github.com/perfgate/perfgate/internal/jobstate"
	"github.com/perfgate/perfgate/internal/store"
)

// SyncStarted moves the check runs of jobs an agent has claimed from
// queued to in_progress. It polls the store rather than hooking the claim,
// so it works whichever replica handed out the job; the step is a
// compare-and-set, so one replica makes each.
func (s *Service) SyncStarted(ctx context.Context) error {
	jobs, err := s.timing().ListJobs(ctx, store.JobFilter{Status: jobstate.Running})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		cr, ok, err := s.checkOf(ctx, j)
		if err != nil || !ok || cr.State != store.CheckQueued {
			continue
		}
		what := "Measuring"
		if j.Kind == kindBaseline {
			what = "Measuring the baseline"
		}
		if _, _, err := s.apply(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.Started},
			out: check.Output{Title: what, Summary: fmt.Sprintf("A runner is benchmarking `%s` (%s tier, attempt %d).", short(j.HeadSHA), j.Tier, j.Attempts)}}); err != nil && !errors.Is(err, errIgnored) {
			return err
		}
	}
	return nil
}

// RunStartSync calls SyncStarted every interval until ctx ends.
func (s *Service) RunStartSync(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "sync started jobs", s.SyncStarted)
}
