package server

import (
	"context"
	"errors"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
)

// bisectResumeEvery is by default how often running bisects are looked over for what
// a crash left undone (a job never queued, a finished one never taken, a
// result never reported) and for a job pinned to a card that is gone
// (stopped after bisectjob.DefaultCardGrace, with a comment).
const bisectResumeEvery = time.Minute

// bisects is the server's bisect wiring: `/perf bisect` starts one
// (Asker), each finished measurement job comes back through the judge
// (dispatch.HandleKind) to the Runner, and the result is posted through
// the outbox on the PR or issue that asked.
type bisects struct {
	runner *bisectjob.Runner
	asker  *bisectjob.Asker
}

// newBisects builds the runner over the store, the GitHub clients and the
// dispatcher's outbox, and routes bisect jobs' ends to it.
func newBisects(s *Server, clients githubapp.ClientCreator) *bisects {
	configs := repoconfig.Loader{}.Full
	spec := bisectjob.QuickTier{Store: s.st, Clients: clients, Configs: configs}
	runner := bisectjob.New(s.st, spec.Spec, bisectjob.OutboxReporter{Outbox: s.dispatch, Clients: clients})
	runner.CardGrace = s.cfg.Loop.BisectCardGrace
	runner.Now = s.now // the store's clock: the demo and tests move it
	b := &bisects{runner: runner, asker: &bisectjob.Asker{Runner: runner, Store: s.st, Clients: clients, Configs: configs}}
	s.dispatch.HandleKind(bisectjob.Kind, func(ctx context.Context, job store.Job) error {
		_, err := b.runner.JobDone(ctx, job)
		if errors.Is(err, bisectjob.ErrStopped) {
			// Recorded as failed and reported: nothing to retry.
			zerolog.Ctx(ctx).Warn().Err(err).Msg("bisect stopped")
			return nil
		}
		return err
	})
	return b
}

// fromChangePoint starts the bisect of a regression change point on the
// default branch, once, reporting to its issue.
func (b *bisects) fromChangePoint(ctx context.Context, cp store.ChangePointRecord) error {
	started, err := b.asker.StartFromChangePoint(ctx, cp)
	if errors.Is(err, bisect.ErrRange) {
		// Commits GitHub does not know (history from elsewhere), a range
		// too long: the issue stands without a bisect.
		zerolog.Ctx(ctx).Warn().Err(err).Int64("change_point", cp.ID).Msg("change point not bisected")
		return nil
	}
	if started {
		zerolog.Ctx(ctx).Info().Int64("change_point", cp.ID).Str("repo", cp.Repo).Int("issue", cp.IssueNumber).Msg("bisect of a change point started")
	}
	return err
}

// resume runs Resume now and then every `every` until ctx ends.
func (b *bisects) resume(ctx context.Context, every time.Duration, log zerolog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := b.runner.Resume(log.WithContext(ctx)); err != nil && ctx.Err() == nil {
			log.Error().Err(err).Msg("resume bisects")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
