package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/store"
)

// SyncStarted moves the check runs of jobs an agent has claimed from
// queued to in_progress. It polls the store rather than hooking the claim,
// so it works whichever replica handed out the job; the conditional
// transition makes one replica do each update.
func (s *Service) SyncStarted(ctx context.Context) error {
	jobs, err := s.st.ListJobs(ctx, store.JobFilter{Status: store.StatusRunning})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		cr, err := s.checkOf(ctx, j)
		if err != nil || cr.State != store.CheckQueued {
			continue
		}
		won, err := s.st.TransitionCheckRun(ctx, cr.ID, store.CheckQueued, store.CheckTransition{State: store.CheckInProgress, Deadline: cr.Deadline})
		if err != nil {
			return err
		}
		if !won {
			continue
		}
		what := "Measuring"
		if j.Kind == kindBaseline {
			what = "Measuring the baseline"
		}
		if err := s.update(ctx, cr, app.Output{Title: what, Summary: fmt.Sprintf("A runner is benchmarking `%s` (%s tier, attempt %d).", short(j.HeadSHA), j.Tier, j.Attempts)}); err != nil {
			s.log.Error().Err(err).Int64("job_id", j.ID).Msg("mark check in progress")
		}
	}
	return nil
}

// RunStartSync calls SyncStarted every interval until ctx ends.
func (s *Service) RunStartSync(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "sync started jobs", s.SyncStarted)
}
