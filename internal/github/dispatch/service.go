// Package dispatch is the server's domain core: it turns the GitHub
// handlers' requests into durable check runs and jobs, judges finished jobs
// with the gate, and walks a regression from warning to escalation. Every
// change of a check run is one step of the pure lifecycle in
// internal/github/checkstate, applied with its effects in one store transaction;
// the GitHub writes those effects call for wait in the store's outbox until
// internal/github/outbox has sent them. It knows nothing about HTTP.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/github/dispatch/completion"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Store is the store the dispatcher needs: each room declares the part it
// uses next to its code, and this is their union (store.Store is one).
type Store interface {
	lifecycleStore
	judgeStore
	timerStore
	findingsStore
	commandsStore
	completion.Queue
}

// The rooms' views of the store: a room reaches the store only through
// its own, so it can call nothing its interface does not declare.
func (s *Service) lifecycle() lifecycleStore { return s.st }
func (s *Service) judging() judgeStore       { return s.st }
func (s *Service) timing() timerStore        { return s.st }
func (s *Service) finding() findingsStore    { return s.st }
func (s *Service) commanding() commandsStore { return s.st }

// lifecycleStore is what the lifecycle and publish room (RequestRun,
// Conclude, Supersede, Close, and every step's apply in step.go) uses: a
// check run's row, changed with its effects and jobs in one transaction.
type lifecycleStore interface {
	ApplyCheck(ctx context.Context, ch store.CheckChange) (store.CheckRun, bool, error)
	PutEffect(ctx context.Context, e store.Effect) (created bool, err error)
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
	CancelPRJobs(ctx context.Context, repo string, pr int, reason string) (store.Superseded, error)
	CancelSuperseded(ctx context.Context, repo string, pr int, newHeadSHA string) (store.Superseded, error)
	GetCheckRun(ctx context.Context, repo, headSHA, tier string) (store.CheckRun, error)
	GetCheckRunByID(ctx context.Context, id int64) (store.CheckRun, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
	ListCheckRuns(ctx context.Context, repo string, pr int) ([]store.CheckRun, error)
	ListResults(ctx context.Context, jobID int64) ([]store.Result, error)
}

// Clients gives installation-scoped GitHub clients (githubapp.ClientCreator
// satisfies it).
type Clients interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// Service implements app.Dispatcher, app.Outbox, app.Appeals and
// app.Releases, and judges finished jobs.
type Service struct {
	st         Store
	clients    Clients
	configs    repoconfig.Loader
	detailsURL string
	details    func(repo, headSHA string, tier check.Tier) string
	now        func() time.Time
	log        zerolog.Logger
	written    func()
	router     *completion.Router // finished jobs to their consumers; the judge takes a check's
	findings   *findings          // profiles and the knowledge base (findings.go); nil: off
	longRun    *LongRunOptions    // the capacity and soak judges (longrun.go); nil: off
	cardGrace  time.Duration      // retestcard.go
	// decide is the pure decision (judge.Judge) a finished check's load
	// feeds and its store step records; a test wraps it to watch the seam.
	decide func(judge.Input) judge.Decision
}

// KindHandler takes a finished job of a kind that belongs to no check run
// (a bisect's measurement, a profiling pass): once per finished job,
// cancelled ones too, again with backoff when it returns an error; the job
// counts as taken once it returns nil.
type KindHandler = completion.Consumer

// HandleKind routes finished jobs of kind to h, their own consumer, past
// the check-run judge. Call it before RunJudge.
func (s *Service) HandleKind(kind string, h KindHandler) { s.router.Route(kind, h, nil) }

// Options configure a Service.
type Options struct {
	Store   Store
	Clients Clients
	// DetailsURL, when set, links each check run to the perfgate server.
	DetailsURL string
	// Details, when set, is each check run's own "Details" link (its
	// dashboard page); it wins over DetailsURL.
	Details func(repo, headSHA string, tier check.Tier) string
	// Now is the clock for deadlines; it must agree with the store's.
	Now func() time.Time
	Log zerolog.Logger
	// Written is called after a step queued GitHub writes (to wake the
	// outbox); optional.
	Written func()
	// JudgePolicy spaces the attempts to judge a job whose judging failed
	// (a store hiccup, GitHub unreachable for the PR's author); after its
	// MaxAttempts the check is concluded saying why. Default: 1 s doubling
	// to 2 minutes, 8 attempts.
	JudgePolicy backoff.Policy
	// JudgePoll is how often an idle judge looks for finished jobs (1 s).
	JudgePoll time.Duration
	// CardGrace is how long a check's job pinned to a card (a retest)
	// waits for it while it is gone (bisectjob.DefaultCardGrace).
	CardGrace time.Duration
}

// New builds a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{st: o.Store, clients: o.Clients, detailsURL: o.DetailsURL, details: o.Details, now: o.Now, log: o.Log, written: o.Written,
		router:    completion.New(completion.Options{Queue: o.Store, Policy: o.JudgePolicy, Poll: o.JudgePoll, Now: o.Now, Log: o.Log}),
		cardGrace: o.CardGrace, decide: judge.Judge}
	s.router.Otherwise(s.jobDone, s.cannotJudge)
	return s
}

// configAt is the repository's config a request plans from: the one the
// handler read and decided by (given), parsed once; else, for a request
// that carries none (the nightly), the file read now at the ref the
// handler names, else the base branch, else the base commit. A missing or
// invalid config is permanent: the config, not GitHub's weather, so
// retrying cannot help.
func (s *Service) configAt(ctx context.Context, given *config.Config, installationID int64, owner, repo, configRef, baseRef, baseSHA string) (*config.Config, error) {
	if given != nil {
		return given, nil
	}
	client, err := s.clients.NewInstallationClient(installationID)
	if err != nil {
		return nil, fmt.Errorf("installation client %d: %w", installationID, err)
	}
	ref := configRef
	if ref == "" {
		ref = baseRef
	}
	if ref == "" {
		ref = baseSHA
	}
	cfg, err := s.configs.Full(ctx, client, owner, repo, ref)
	var cerr *repoconfig.Error
	if errors.Is(err, repoconfig.ErrNotConfigured) || errors.As(err, &cerr) {
		return nil, backoff.Permanent(err)
	}
	return cfg, err
}

// Job kinds beyond the triggers the app names.
const (
	kindBaseline = "baseline"  // measures the base commit when no baseline exists
	kindExtend   = "extension" // more runs for an inconclusive comparison
)

// RequestRun implements app.Dispatcher: it snapshots the base branch's
// config into a plan and records the check run and its jobs in one
// transaction, before returning, so a crash after the webhook's 2xx loses
// nothing and a retried delivery asks once.
func (s *Service) RequestRun(ctx context.Context, req request.Run) error {
	cfg, err := s.configAt(ctx, req.Config, req.InstallationID, req.Owner, req.Repo, req.ConfigRef, req.BaseRef, req.BaseSHA)
	if err != nil {
		return err
	}
	if req.Tier.LongRun() {
		return s.requestLongRun(ctx, req, cfg)
	}
	tier, err := cfg.Tier(string(req.Tier))
	if err != nil {
		return backoff.Permanent(err)
	}
	return s.retryCAS(ctx, func() (bool, error) {
		prev, found, err := s.row(ctx, req.FullName(), req.HeadSHA, string(req.Tier))
		if err != nil {
			return false, err
		}
		key := requestKey(req.DeliveryID, req.Tier)
		if found && key != "" && prev.RequestKey == key {
			return true, nil // this delivery already asked
		}
		// A tier that interleaves (the merge default) measures base and
		// head in one job on one card; others measure the head alone.
		plan, err := agentapi.PlanAt(cfg, string(req.Tier), agentapi.Commits{Repo: req.FullName(), Head: req.HeadSHA, Base: req.BaseSHA})
		if err != nil {
			return false, backoff.Permanent(fmt.Errorf("plan %s tier: %w", req.Tier, err))
		}
		jobIDs := []int64{}
		if found && req.Confirm {
			// A retest after a suspected regression re-measures on the
			// same card (three runs, or the tier's pairs again), and the
			// new runs join the evidence: pressing retest must not be a
			// way to draw a fresh sample until green. Only what the
			// earlier run finished joins: the jobs it still had queued or
			// running are cancelled with it (the lifecycle's Requested on
			// an open check), so no runner measures for a replaced run.
			if jobIDs, err = s.endedJobs(ctx, prev.JobIDs); err != nil {
				return false, err
			}
			plan.Repeats = 3
			if uuid := s.cardOf(ctx, prev.JobIDs); uuid != "" {
				plan.GPUUUID = uuid
			}
		}
		plans, cells := matrixPlans(plan, tier)
		var specs []store.JobSpec
		for i, p := range plans {
			spec, err := jobSpec(req, cfg, p, cells[i])
			if err != nil {
				return false, err
			}
			specs = append(specs, spec)
		}
		if !found {
			prev = store.CheckRun{Repo: req.FullName(), HeadSHA: req.HeadSHA, Tier: string(req.Tier)}
		}
		prev.PRNumber, prev.InstallationID = req.PR, req.InstallationID
		doc := s.docOf(prev)
		if req.Author != "" {
			doc.Author = req.Author
		}
		_, applied, err := s.apply(ctx, prev, step{
			ev:           checkstate.Event{Kind: checkstate.Requested, Tier: string(req.Tier)},
			doc:          &doc,
			out:          check.Output{Title: "Queued", Summary: fmt.Sprintf("Waiting for a runner to benchmark `%s` (%s tier).", rev.Short(req.HeadSHA), req.Tier)},
			jobIDs:       jobIDs,
			jobs:         specs,
			key:          key,
			cancelReason: fmt.Sprintf("replaced by a newer run of %s (%s)", rev.Short(req.HeadSHA), req.Trigger),
			replaced:     [2]string{"Replaced by a newer run", fmt.Sprintf("A newer run of `%s` (%s) replaced this one before it finished; see the latest `%s` check.", rev.Short(req.HeadSHA), req.Trigger, check.CheckName(req.Tier))},
			actor:        req.RequestedBy,
			action:       "run.requested",
			detail:       map[string]any{"trigger": req.Trigger, "delivery": req.DeliveryID, "jobs": len(specs)},
		})
		return applied, err
	})
}

// requestKey identifies a delivery's request for one tier.
func requestKey(deliveryID string, tier check.Tier) string {
	if deliveryID == "" {
		return ""
	}
	return deliveryID + "/" + string(tier)
}

func jobSpec(req request.Run, cfg *config.Config, plan agentapi.Plan, cell string) (store.JobSpec, error) {
	snap, err := newSnapshot(cfg, plan)
	if err != nil {
		return store.JobSpec{}, err
	}
	snap.Cell = cell
	snapshot, err := snap.encode()
	if err != nil {
		return store.JobSpec{}, err
	}
	return store.JobSpec{
		Tier: plan.Tier, Kind: req.Trigger, Repo: req.FullName(), InstallationID: req.InstallationID,
		PRNumber: req.PR, HeadSHA: plan.HeadSHA, BaseSHA: req.BaseSHA, Config: snapshot,
		Labels: cfg.Runner.Labels, GPUUUID: plan.GPUUUID,
	}, nil
}

// Conclude implements app.Dispatcher: a check decided without a run
// (skipped, waiting for a maintainer, broken or missing config).
func (s *Service) Conclude(ctx context.Context, c request.Conclude) error {
	repo := c.Owner + "/" + c.Repo
	return s.retryCAS(ctx, func() (bool, error) {
		prev, found, err := s.row(ctx, repo, c.HeadSHA, string(c.Tier))
		if err != nil {
			return false, err
		}
		key := requestKey(c.DeliveryID, c.Tier)
		if found && key != "" && prev.RequestKey == key {
			return true, nil
		}
		if !found {
			prev = store.CheckRun{Repo: repo, HeadSHA: c.HeadSHA, Tier: string(c.Tier)}
		}
		prev.PRNumber, prev.InstallationID = c.PR, c.InstallationID
		_, applied, err := s.apply(ctx, prev, step{
			ev: checkstate.Event{Kind: checkstate.Concluded, Phase: c.Phase, Tier: string(c.Tier)},
			// The verdict goes; the commit's look budget stays with it.
			doc:          &verdictDoc{Looks: s.docOf(prev).Looks},
			out:          c.Output,
			key:          key,
			replaced:     [2]string{"Replaced", fmt.Sprintf("perfgate concluded `%s` without a run: %s", check.CheckName(c.Tier), c.Output.Title)},
			cancelReason: "concluded without a run: " + c.Output.Title,
		})
		return applied, err
	})
}

// Supersede implements app.Dispatcher: a new push cancels the PR's older
// queued jobs, asks running ones to stop, concludes the older commits' open
// checks and stops their clocks (the new SHA gets its own).
func (s *Service) Supersede(ctx context.Context, repo string, pr int, newHeadSHA string) error {
	if _, err := s.lifecycle().CancelSuperseded(ctx, repo, pr, newHeadSHA); err != nil {
		return err
	}
	return s.eachRow(ctx, repo, pr, func(cr store.CheckRun) bool { return cr.HeadSHA != newHeadSHA }, step{
		ev:           checkstate.Event{Kind: checkstate.NewerPush},
		cancelReason: "superseded by " + rev.Short(newHeadSHA),
		outFor: func(cr store.CheckRun) check.Output {
			return check.Output{Title: "Superseded by a newer push",
				Summary: fmt.Sprintf("The pull request moved on to `%s`; perfgate measures that commit instead of `%s`.", rev.Short(newHeadSHA), rev.Short(cr.HeadSHA))}
		},
	})
}

// Close implements app.Dispatcher: a closed pull request's jobs are
// cancelled, its open checks concluded as cancelled and its clocks
// stopped, so nothing escalates or mentions its author afterwards.
func (s *Service) Close(ctx context.Context, repo string, pr int, by string) error {
	if _, err := s.lifecycle().CancelPRJobs(ctx, repo, pr, "pull request closed"); err != nil {
		return err
	}
	return s.eachRow(ctx, repo, pr, nil, step{
		ev:           checkstate.Event{Kind: checkstate.PRClosed},
		cancelReason: "pull request closed",
		actor:        by,
		out: check.Output{Title: "PR closed",
			Summary: "The pull request was closed before perfgate finished, so nothing more runs for it. Reopening it measures it again."},
	})
}

// eachRow applies st to every check run of the PR that keep selects.
func (s *Service) eachRow(ctx context.Context, repo string, pr int, keep func(store.CheckRun) bool, st step) error {
	runs, err := s.lifecycle().ListCheckRuns(ctx, repo, pr)
	if err != nil {
		return err
	}
	var errs []error
	for _, cr := range runs {
		if keep != nil && !keep(cr) {
			continue
		}
		err := s.retryCAS(ctx, func() (bool, error) {
			cur, err := s.lifecycle().GetCheckRunByID(ctx, cr.ID)
			if err != nil {
				return false, err
			}
			_, applied, err := s.apply(ctx, cur, st)
			if errors.Is(err, errIgnored) {
				return true, nil
			}
			return applied, err
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// row reads the check run of (repo, sha, tier), reporting whether it exists.
func (s *Service) row(ctx context.Context, repo, sha, tier string) (store.CheckRun, bool, error) {
	cr, err := s.lifecycle().GetCheckRun(ctx, repo, sha, tier)
	if errors.Is(err, store.ErrNotFound) {
		return store.CheckRun{}, false, nil
	}
	return cr, err == nil, err
}

// endedJobs is the jobs of ids that are no longer queued or running, in
// order.
func (s *Service) endedJobs(ctx context.Context, ids []int64) ([]int64, error) {
	out := []int64{}
	for _, id := range ids {
		j, err := s.lifecycle().GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job %d of the run a retest replaces: %w", id, err)
		}
		if j.Status != jobstate.Queued && j.Status != jobstate.Running {
			out = append(out, id)
		}
	}
	return out, nil
}

// cardOf returns the GPU the jobs' measured runs used, for pinning a retest.
func (s *Service) cardOf(ctx context.Context, jobIDs []int64) string {
	for i := len(jobIDs) - 1; i >= 0; i-- {
		res, err := s.lifecycle().ListResults(ctx, jobIDs[i])
		if err != nil {
			continue
		}
		for _, r := range res {
			if r.Kind == jobstate.KindMeasured && r.GPUUUID != "" {
				return r.GPUUUID
			}
		}
	}
	return ""
}

// audit writes an audit entry outside a lifecycle step.
func (s *Service) audit(ctx context.Context, actor, action, repo string, pr int, detail map[string]any) {
	raw, err := json.Marshal(detail)
	if err != nil {
		s.log.Error().Err(err).Str("action", action).Msg("encode audit detail")
		raw = nil
	}
	if actor == "" {
		actor = "perfgate"
	}
	if _, err := s.lifecycle().AppendAudit(ctx, store.AuditEntry{Actor: actor, Action: action, Repo: repo, PRNumber: pr, Detail: raw}); err != nil {
		s.log.Error().Err(err).Str("action", action).Msg("audit log write failed")
	}
}
