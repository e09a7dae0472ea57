// Package bisectjob runs bisects on perfgate's job queue. Each measurement
// a bisect asks for (package bisect's Request) becomes one job of kind
// "bisect" — the quick tier at that commit interleaved with its reference
// (the job's base) on the bisect's card — and the
// bisect's state waits in the store between jobs, so a restarted server
// goes on where it stopped. The server wires three calls: Start when a
// bisect is asked for, JobDone when a job of this kind finishes, Resume on
// a timer (it repairs what a crash between two writes left).
package bisectjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Kind is store.JobSpec.Kind of a bisect's measurement jobs.
const Kind = "bisect"

// Store is what the runner needs of the database.
type Store interface {
	Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error)
	GetJob(ctx context.Context, id int64) (store.Job, error)
	CancelJob(ctx context.Context, id int64, reason string) (store.Job, error)
	ListResults(ctx context.Context, jobID int64) ([]store.Result, error)
	CreateBisect(ctx context.Context, b store.BisectRecord) (store.BisectRecord, error)
	GetBisect(ctx context.Context, id int64) (store.BisectRecord, error)
	UpdateBisect(ctx context.Context, id int64, version int, u store.BisectUpdate) (store.BisectRecord, error)
	BisectByJob(ctx context.Context, jobID int64) (store.BisectRecord, error)
	ListBisects(ctx context.Context, f store.BisectFilter) ([]store.BisectRecord, error)
	ListAgents(ctx context.Context) ([]store.Agent, error)
	// When a pinned card was first seen missing (store.Singletons).
	CardMissingSince(ctx context.Context, card string) (time.Time, error)
	CardSeen(ctx context.Context, card string) error
}

// SpecFunc builds the job that measures req for the bisect rec: the quick
// tier's plan from the repository's config, interleaving commit req.SHA
// (head) with req.RefSHA (base) for req.Pairs pairs, pinned to one card so
// every job of the bisect runs on the same GPU. The server supplies it: it
// owns configs and plans. Kind, HeadSHA and BaseSHA are set by the runner.
type SpecFunc func(ctx context.Context, rec store.BisectRecord, req bisect.Request) (store.JobSpec, error)

// Reporter posts a finished bisect where it was asked for (the PR or
// issue of rec.Number, the change point's issue).
type Reporter interface {
	Report(ctx context.Context, rec store.BisectRecord, s *bisect.State) error
}

// StopReporter is told about a bisect that stopped before its result (a
// cancelled job, a config that no longer plans the job); a Reporter may
// implement it.
type StopReporter interface {
	ReportStopped(ctx context.Context, rec store.BisectRecord, cause error) error
}

// ErrStopped marks the error of a bisect that stopped for good: it is
// recorded as failed (and reported), so the event need not be retried.
var ErrStopped = errors.New("bisect stopped")

// Runner drives bisects through the queue.
type Runner struct {
	// CardGrace is how long a pending job may wait for a pinned card that
	// no available runner offers before Resume stops its bisect; 0 is
	// DefaultCardGrace.
	CardGrace time.Duration
	// Now is the clock for CardGrace and ResumeQuiet, the store's; nil is
	// time.Now.
	Now func() time.Time

	st     Store
	spec   SpecFunc
	report Reporter
}

// New returns a runner.
func New(st Store, spec SpecFunc, report Reporter) *Runner {
	return &Runner{st: st, spec: spec, report: report}
}

// Start records a bisect over commits (good first, from a
// bisect.CommitLister) and queues its first job. rec names the repository,
// range, metric, requester and where to report; its State is filled here.
// A bisect of the same range and metric that is already running is
// store.ErrConflict.
func (r *Runner) Start(ctx context.Context, rec store.BisectRecord, commits []bisect.Commit, cfg bisect.Config) (store.BisectRecord, error) {
	if cfg.Metric == "" {
		cfg.Metric = rec.Metric
	}
	if cfg.Repo == "" {
		cfg.Repo = rec.Repo
	}
	s, err := bisect.New(commits, cfg)
	if err != nil {
		return store.BisectRecord{}, fmt.Errorf("start bisect of %s: %w", rec.Repo, err)
	}
	if rec.GoodSHA == "" || rec.BadSHA == "" {
		rec.GoodSHA, rec.BadSHA = commits[0].SHA, commits[len(commits)-1].SHA
	}
	if rec.State, err = s.Marshal(); err != nil {
		return store.BisectRecord{}, err
	}
	rec.JobID = 0
	created, err := r.st.CreateBisect(ctx, rec)
	if err != nil {
		return store.BisectRecord{}, fmt.Errorf("start bisect of %s: %w", rec.Repo, err)
	}
	return r.advance(ctx, created, s)
}

// JobDone takes a finished job's runs into its bisect and queues the next
// job, or reports the result. It reports false for jobs of another kind.
// A job whose bisect no longer waits for it (a duplicate delivery, a
// bisect that moved on) is ignored.
func (r *Runner) JobDone(ctx context.Context, job store.Job) (bool, error) {
	if job.Kind != Kind {
		return false, nil
	}
	if job.Status == jobstate.Queued || job.Status == jobstate.Running {
		return true, nil
	}
	log := zerolog.Ctx(ctx).With().Int64("job_id", job.ID).Str("repo", job.Repo).Logger()
	rec, err := r.st.BisectByJob(ctx, job.ID)
	if errors.Is(err, store.ErrNotFound) {
		log.Info().Msg("bisect job with no bisect waiting for it: ignored")
		return true, nil
	}
	if err != nil {
		return true, err
	}
	s, err := bisect.Load(rec.State)
	if err != nil {
		return true, r.failBisect(ctx, rec, fmt.Errorf("bisect %d: %w", rec.ID, err))
	}
	req, ok := s.Next()
	if !ok || req.SHA != job.HeadSHA || req.RefSHA != job.BaseSHA {
		log.Warn().Int64("bisect", rec.ID).Msg("bisect job does not match the bisect's pending request: ignored")
		return true, nil
	}
	switch job.Status {
	case jobstate.Succeeded:
		m, verr := r.values(ctx, job, s.Config.Metric)
		if verr != nil {
			err = s.Fail(req, verr.Error())
		} else {
			err = s.Observe(req, m)
		}
	case jobstate.Cancelled:
		// Someone stopped the measurement (a cancelled job, a drained
		// runner): the bisect stops and says so rather than guessing.
		return true, r.failBisect(ctx, rec, fmt.Errorf("job %d measuring %.7s was cancelled: %s", job.ID, job.HeadSHA, job.FailureReason))
	default:
		// The commit did not build, start or measure: skip it, as git
		// bisect's 125.
		reason := job.FailureReason
		if reason == "" {
			reason = "the job failed"
		}
		err = s.Fail(req, reason)
	}
	if err != nil {
		return true, fmt.Errorf("bisect %d: %w", rec.ID, err)
	}
	_, err = r.advance(ctx, rec, s)
	return true, err
}

// ResumeQuiet is how long Resume leaves a bisect that just moved alone.
const ResumeQuiet = 2 * time.Minute

// Resume repairs running bisects after a crash: one whose pending job was
// never queued gets it; one whose job finished without JobDone taking it
// takes it now; a finished one that was never reported is reported. It
// also stops a bisect whose queued job waits for a pinned card that has
// been gone for longer than CardGrace (see cardGone), saying so where it
// was asked for.
//
// A bisect that moved within ResumeQuiet is left to what moved it: a job
// that just finished is the judge's (dispatch.HandleKind, with its
// retries), a bisect just written with no job is its Start's. Taking them
// as well would race them, queue the next job twice and cancel one copy,
// perhaps after a runner claimed it.
func (r *Runner) Resume(ctx context.Context) error {
	recs, err := r.st.ListBisects(ctx, store.BisectFilter{Status: store.BisectRunning})
	if err != nil {
		return fmt.Errorf("resume bisects: %w", err)
	}
	var (
		errs   []error
		agents []store.Agent
		listed bool
	)
	now := r.now()
	for _, rec := range recs {
		if rec.JobID != 0 {
			job, err := r.st.GetJob(ctx, rec.JobID)
			if err == nil && !job.FinishedAt.IsZero() && now.Sub(job.FinishedAt) < ResumeQuiet {
				continue // the judge takes it
			}
			if err == nil && job.Status == jobstate.Queued && job.GPUUUID != "" && !job.CancelRequested {
				if !listed {
					if agents, err = r.st.ListAgents(ctx); err != nil {
						errs = append(errs, fmt.Errorf("resume bisects: %w", err))
						continue
					}
					listed = true
				}
				gone, err := r.cardGone(ctx, job, agents, now)
				if err != nil {
					errs = append(errs, fmt.Errorf("resume bisect %d: %w", rec.ID, err))
					continue
				}
				if gone != nil {
					err = r.stopForCard(ctx, rec, gone)
					if err != nil {
						errs = append(errs, fmt.Errorf("resume bisect %d: %w", rec.ID, err))
					}
					continue
				}
			}
			if err == nil {
				_, err = r.JobDone(ctx, job)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("resume bisect %d: %w", rec.ID, err))
			}
			continue
		}
		if now.Sub(rec.UpdatedAt) < ResumeQuiet {
			continue // its Start (or the JobDone that wrote it) is still at it
		}
		s, err := bisect.Load(rec.State)
		if err == nil {
			_, err = r.advance(ctx, rec, s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("resume bisect %d: %w", rec.ID, err))
		}
	}
	return errors.Join(errs...)
}

// advance queues s's next job and stores s with that job's id, or reports
// s when it is done. A crash between queueing and storing leaves the bisect
// waiting for the job before (or for none, on Start): Resume takes that
// job's runs again, which the reloaded state has not seen, and queues the
// next job again — the first copy is an orphan whose end is ignored. A
// bisect another replica moved on first keeps that replica's job and ours
// is cancelled.
func (r *Runner) advance(ctx context.Context, rec store.BisectRecord, s *bisect.State) (store.BisectRecord, error) {
	req, pending := s.Next()
	state, err := s.Marshal()
	if err != nil {
		return rec, err
	}
	if !pending {
		// Written with no job first, so a failed report is retried by
		// Resume; done only once the report is out.
		if rec, err = r.st.UpdateBisect(ctx, rec.ID, rec.Version, store.BisectUpdate{Status: store.BisectRunning, State: state}); err != nil {
			return rec, err
		}
		if r.report != nil {
			if err := r.report.Report(ctx, rec, s); err != nil {
				return rec, fmt.Errorf("report bisect %d: %w", rec.ID, err)
			}
		}
		return r.st.UpdateBisect(ctx, rec.ID, rec.Version, store.BisectUpdate{Status: store.BisectDone, State: state})
	}
	spec, err := r.spec(ctx, rec, req)
	if err != nil && !backoff.IsPermanent(err) {
		// GitHub's weather: the event is retried (JobDone's caller, or
		// Resume for a bisect with no job).
		return rec, fmt.Errorf("plan bisect %d's job for %.7s: %w", rec.ID, req.SHA, err)
	}
	if err != nil {
		return rec, r.failBisect(ctx, rec, fmt.Errorf("plan the job for %.7s: %w", req.SHA, err))
	}
	spec.Kind, spec.Repo, spec.HeadSHA, spec.BaseSHA = Kind, rec.Repo, req.SHA, req.RefSHA
	if spec.InstallationID == 0 {
		spec.InstallationID = rec.InstallationID
	}
	job, err := r.st.Enqueue(ctx, spec)
	if err != nil {
		return rec, fmt.Errorf("queue bisect %d's job for %.7s: %w", rec.ID, req.SHA, err)
	}
	up, err := r.st.UpdateBisect(ctx, rec.ID, rec.Version, store.BisectUpdate{Status: store.BisectRunning, State: state, JobID: job.ID})
	if err != nil {
		if _, cerr := r.st.CancelJob(ctx, job.ID, fmt.Sprintf("bisect %d moved on without it", rec.ID)); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return rec, err
	}
	return up, nil
}

// failBisect stops a bisect that cannot go on, keeping its state, and
// says so where it was asked for.
func (r *Runner) failBisect(ctx context.Context, rec store.BisectRecord, cause error) error {
	up, err := r.st.UpdateBisect(ctx, rec.ID, rec.Version, store.BisectUpdate{Status: store.BisectFailed, State: rec.State})
	if err != nil {
		return errors.Join(cause, err)
	}
	if sr, ok := r.report.(StopReporter); ok {
		if err := sr.ReportStopped(ctx, up, cause); err != nil {
			zerolog.Ctx(ctx).Error().Err(err).Int64("bisect", rec.ID).Msg("report a stopped bisect")
		}
	}
	return fmt.Errorf("%w: %w", ErrStopped, cause)
}

// values reads a succeeded job's measured pairs of its latest attempt: the
// head's runs (the commit) and the base's (its reference), by pair.
func (r *Runner) values(ctx context.Context, job store.Job, metric string) (bisect.Measurement, error) {
	rows, err := r.st.ListResults(ctx, job.ID)
	if err != nil {
		return bisect.Measurement{}, err
	}
	head, base := map[int]*result.Result{}, map[int]*result.Result{}
	for _, row := range rows {
		if row.Kind != jobstate.KindMeasured || row.Attempt != job.Attempts {
			continue
		}
		data := row.Samples
		if len(data) == 0 {
			data = row.Summary
		}
		res, err := result.Parse(data)
		if err != nil {
			return bisect.Measurement{}, fmt.Errorf("result %d of job %d: %w", row.ID, job.ID, err)
		}
		switch row.Side {
		case agentapi.SideHead:
			head[row.Pair] = res
		case agentapi.SideBase:
			base[row.Pair] = res
		default:
			return bisect.Measurement{}, fmt.Errorf("job %d's run %d is not interleaved (side %q): a bisect measures in pairs", job.ID, row.RunIndex, row.Side)
		}
	}
	var hs, bs []*result.Result
	for pair := 0; head[pair] != nil && base[pair] != nil; pair++ {
		hs, bs = append(hs, head[pair]), append(bs, base[pair])
	}
	if len(hs) == 0 {
		return bisect.Measurement{}, fmt.Errorf("job %d stored no complete pair of measured runs", job.ID)
	}
	var m bisect.Measurement
	if m.Values, err = bisect.RunValues(hs, metric); err != nil {
		return m, err
	}
	if m.RefValues, err = bisect.RunValues(bs, metric); err != nil {
		return m, err
	}
	return m, nil
}
