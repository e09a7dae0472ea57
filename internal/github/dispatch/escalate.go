package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// timerStore is what the timers room (escalate.go, started.go,
// queuenote.go, nightly.go) uses: the open and due check runs, the jobs,
// the queue and the runners.
type timerStore interface {
	baseline.Store
	// The periodic jobs run in the replica that takes their turn.
	store.Singletons
	DueCheckRuns(ctx context.Context) ([]store.CheckRun, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
	ListOpenCheckRuns(ctx context.Context) ([]store.CheckRun, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	ListAgents(ctx context.Context) ([]store.Agent, error)
	ListAttempts(ctx context.Context, f store.AttemptFilter) ([]store.Attempt, error)
	ListQueue(ctx context.Context) ([]store.QueueEntry, error)
	Arrivals(ctx context.Context, since, recent time.Time) ([]fleet.Arrived, error)
	RunningQueuedChecks(ctx context.Context) ([]int64, error)
	PutTrend(ctx context.Context, p store.TrendPoint) error
}

// Escalate turns every warned check whose deadline has passed into a
// blocking failure and says so on the PR. Deadlines live in the store, so a
// restarted server escalates on time; the step is a compare-and-set, so of
// several replicas one queues the comment; the outbox posts it and the
// failing check, retrying until GitHub takes them.
func (s *Service) Escalate(ctx context.Context) error {
	due, err := s.timing().DueCheckRuns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, cr := range due {
		// An open check (a retest measuring the commit) lets its verdict
		// decide: the lifecycle ignores the deadline until then. On any
		// other phase the clock no longer applies and is cleared.
		_, _, err := s.apply(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.DeadlinePassed}})
		if err != nil && !errors.Is(err, errIgnored) {
			errs = append(errs, fmt.Errorf("escalate %s@%s %s: %w", cr.Repo, rev.Short(cr.HeadSHA), cr.Tier, err))
		}
	}
	return errors.Join(errs...)
}

// RunEscalations calls Escalate every interval until ctx ends.
func (s *Service) RunEscalations(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "escalation pass", s.Escalate)
}

// every runs fn now and then at each tick until ctx ends, logging errors.
func (s *Service) every(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg(what)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openJobsJudged reports whether every job of an open row has ended and
// been judged — the row should not be open any more.
func (s *Service) openJobsJudged(ctx context.Context, cr store.CheckRun) (bool, store.Job, error) {
	ids := cr.JobIDs
	if b := s.docOf(cr).BaselineJob; b != 0 {
		ids = append(append([]int64{}, ids...), b)
	}
	var last store.Job
	for _, id := range ids {
		j, err := s.timing().GetJob(ctx, id)
		if err != nil {
			return false, store.Job{}, err
		}
		if j.JudgedAt.IsZero() {
			return false, store.Job{}, nil
		}
		if j.Kind != kindBaseline {
			last = j
		}
	}
	return len(cr.JobIDs) > 0, last, nil
}

// Reconcile is the safety net behind the judge: an open check whose jobs
// all ended and were judged (a judgement lost to a crash between replicas,
// a row whose race was lost) is judged again, and concluded with the
// reason if that fails — no check stays open after its jobs end. An open
// check with no jobs at all is concluded too.
func (s *Service) Reconcile(ctx context.Context) error {
	open, err := s.timing().ListOpenCheckRuns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, cr := range open {
		if len(cr.JobIDs) == 0 {
			errs = append(errs, s.broken(ctx, cr, true, []string{"the check run has no jobs: perfgate lost its request; comment `/perf retest`"}))
			continue
		}
		done, job, err := s.openJobsJudged(ctx, cr)
		if err != nil || !done {
			errs = append(errs, err)
			continue
		}
		s.log.Warn().Int64("check_run", cr.ID).Str("repo", cr.Repo).Str("sha", cr.HeadSHA).Str("tier", cr.Tier).
			Msg("open check run whose jobs all ended: judging it again")
		if err := s.jobDone(ctx, job); err != nil {
			s.log.Error().Err(err).Int64("job_id", job.ID).Msg("reconcile: cannot judge a finished job; concluding its check with the reason")
			if cerr := s.cannotJudge(ctx, job, err); cerr != nil {
				errs = append(errs, fmt.Errorf("reconcile check run %d: judge job %d: %w; conclude it: %w", cr.ID, job.ID, err, cerr))
			}
		}
	}
	return errors.Join(errs...)
}

// RunReconcile calls Reconcile every interval until ctx ends.
func (s *Service) RunReconcile(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "reconcile open check runs", s.Reconcile)
}

// pings reports whether a transition's effects mention the PR's author.
func pings(effects []checkstate.Effect) bool {
	for _, e := range effects {
		if e.Kind == checkstate.WarnAuthor || e.Kind == checkstate.AnnounceEscalation {
			return true
		}
	}
	return false
}

// prClosed asks GitHub, at the moment a warning or an escalation is about
// to be written, whether the row's PR is closed. Deliveries can arrive and
// be retried out of order (an "opened" whose processing failed is retried
// after "closed" succeeded), so the PR's state on GitHub decides, not the
// order perfgate saw events in. Not knowing (GitHub down, no PR) counts as
// open: the outbox asks again before it posts the comment.
func (s *Service) prClosed(ctx context.Context, cr store.CheckRun) bool {
	if cr.PRNumber <= 0 || s.clients == nil {
		return false
	}
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return false
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	pr, _, err := client.PullRequests.Get(ctx, owner, repo, cr.PRNumber)
	if err != nil {
		s.log.Warn().Err(err).Str("repo", cr.Repo).Int("pr", cr.PRNumber).Msg("look up whether the PR is closed before warning")
		return false
	}
	return pr.GetState() == "closed"
}

// closeStale closes the PR's work as its "closed" delivery does, for a row
// that was about to warn or escalate on a closed PR; the step that asked is
// ignored.
func (s *Service) closeStale(ctx context.Context, cr store.CheckRun) error {
	s.log.Warn().Int64("check_run", cr.ID).Str("repo", cr.Repo).Int("pr", cr.PRNumber).
		Msg("the PR is closed on GitHub: concluding its checks instead of warning or escalating")
	if err := s.Close(ctx, cr.Repo, cr.PRNumber, "perfgate"); err != nil {
		return err
	}
	return errIgnored
}

// ifOpen marks a comment effect to be dropped if the PR is closed when the
// outbox sends it.
func ifOpen(e store.Effect) (store.Effect, error) {
	var b store.CommentBody
	if err := json.Unmarshal(e.Body, &b); err != nil {
		return e, fmt.Errorf("mark comment %s: %w", e.Key, err)
	}
	b.IfOpen = true
	raw, err := json.Marshal(b)
	if err != nil {
		return e, fmt.Errorf("mark comment %s: %w", e.Key, err)
	}
	e.Body = raw
	return e, nil
}
