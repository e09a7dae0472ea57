package dispatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// judgeStore is what the judge room (judge.go, load.go, matrix.go,
// paired.go, trend.go) reads: a check's jobs and their results, and the
// baselines it compares against. It writes only through its one step
// (lifecycleStore.ApplyCheck), which carries the jobs it adds, the trend
// points and the first baselines.
type judgeStore interface {
	baseline.Reader
	GetCheckRun(ctx context.Context, repo, headSHA, tier string) (store.CheckRun, error)
	GetCheckRunByID(ctx context.Context, id int64) (store.CheckRun, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
	ListCheckRuns(ctx context.Context, repo string, pr int) ([]store.CheckRun, error)
	ListResults(ctx context.Context, jobID int64) ([]store.Result, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
}

// verdictDoc is what a check run row keeps of its last judgement, enough to
// re-render it (escalation, an accepted appeal) without re-running the gate.
type verdictDoc struct {
	Report *gate.Report        `json:"report,omitempty"`
	Env    *result.Environment `json:"environment,omitempty"`
	Author string              `json:"author,omitempty"`
	After  time.Duration       `json:"escalate_after,omitempty"`
	Notes  []string            `json:"notes,omitempty"`
	// Held is the lifecycle's held regression (checkstate.State.Held).
	Held string `json:"held,omitempty"`
	// BaselineJob is the job measuring the base commit for this check
	// while it runs.
	BaselineJob int64 `json:"baseline_job,omitempty"`
	// Looks is the pull request's error budget per baseline key (the
	// tier, or "<tier>/<cell>" for a nightly matrix cell): every
	// judgement of this check — the first runs, the added runs, each
	// retest, an appeal's re-test — spends from it, so no sequence of
	// retests can call an unchanged PR a regression more often than the
	// tier allows. It survives every step of this row; a new commit that
	// changes no file continues it (see prLooks); one that changes code
	// starts afresh.
	Looks map[string]gate.Looks `json:"looks,omitempty"`
	// Cost is what a regression costs a month at the price the job was
	// queued with (cost.go); the dashboard reads it under "cost".
	Cost *cost.Estimate `json:"cost,omitempty"`
	// LongRun is a capacity or soak check's verdict (longruncheck.go).
	LongRun *longRunDoc `json:"long_run,omitempty"`
	// Settings is the base/head diff of what the engine ran with, carried
	// beside the report (the gate never reads it): the values that differ
	// and the pull request's knob lines that did or did not take effect.
	Settings *result.SettingsDiff `json:"engine_settings,omitempty"`
}

// withLooks is doc with the budgets in looks stored over its own.
func (doc verdictDoc) withLooks(looks map[string]gate.Looks) verdictDoc {
	if len(looks) == 0 {
		return doc
	}
	merged := make(map[string]gate.Looks, len(doc.Looks)+len(looks))
	for k, v := range doc.Looks {
		merged[k] = v
	}
	for k, v := range looks {
		merged[k] = v
	}
	doc.Looks = merged
	return doc
}

// JobDone is the agent API's hook: a job finished, failed or was given up
// on. The finished job waits in the store until its consumer has taken it
// (the completion router), so this only wakes the router: judging never
// runs inside an agent's request, and a crash between the finish and the
// verdict loses nothing.
func (s *Service) JobDone(ctx context.Context, job store.Job) { s.router.Wake() }

// WakeJudge makes an idle router look for finished jobs now.
func (s *Service) WakeJudge() { s.router.Wake() }

// RunJudge hands finished jobs to their consumers until ctx ends: a
// check's jobs to the judge, the other kinds to theirs (HandleKind).
func (s *Service) RunJudge(ctx context.Context) { s.router.Run(ctx) }

// JudgePass hands over a batch of finished jobs and returns how many it
// claimed. A consumer that fails is called again with backoff; a check's
// job that keeps failing concludes its check with the reason, so no check
// stays open after its jobs end.
func (s *Service) JudgePass(ctx context.Context) (int, error) { return s.router.Pass(ctx) }

// cannotJudge concludes the check of a job perfgate failed to judge, saying
// why. It is perfgate's failure, not the commit's, so it does not block.
func (s *Service) cannotJudge(ctx context.Context, job store.Job, cause error) error {
	for range 5 {
		cr, ok, err := s.checkOf(ctx, job)
		if err != nil || !ok || !check.Phase(cr.State).Open() {
			return err
		}
		err = s.broken(ctx, cr, true, []string{fmt.Sprintf("perfgate could not judge job %d: %v", job.ID, cause)})
		if !errors.Is(err, errMoved) {
			return err
		}
	}
	return errMoved
}

// errMoved: the check run changed while it was being judged (a runner
// started, a retest was requested, another replica judged it); judging
// starts over from the row as it now is.
var errMoved = errors.New("check run changed while judging")

func (s *Service) jobDone(ctx context.Context, job store.Job) error {
	if check.Tier(job.Kind).LongRun() {
		return s.longRunDone(ctx, job)
	}
	for range 5 {
		if err := s.jobDoneOnce(ctx, job); !errors.Is(err, errMoved) {
			return err
		}
	}
	return errMoved
}

// settle applies a judging step: a lost race is errMoved, an event that no
// longer applies is done.
func (s *Service) settle(ctx context.Context, cr store.CheckRun, st step) error {
	_, err := s.settleRow(ctx, cr, st)
	return err
}

// settleRow is settle that returns the row as the step left it (zero
// when the event no longer applied).
func (s *Service) settleRow(ctx context.Context, cr store.CheckRun, st step) (store.CheckRun, error) {
	row, applied, err := s.apply(ctx, cr, st)
	if errors.Is(err, errIgnored) {
		return store.CheckRun{}, nil
	}
	if err == nil && !applied {
		return store.CheckRun{}, errMoved
	}
	return row, err
}

func (s *Service) jobDoneOnce(ctx context.Context, job store.Job) error {
	if job.Status == jobstate.Cancelled {
		return nil // superseded, closed or replaced: that check is concluded
	}
	cr, ok, err := s.checkOf(ctx, job)
	if err != nil || !ok {
		return err // not found: a job queued by hand, or one a retest replaced
	}
	if !check.Phase(cr.State).Open() {
		return nil // already concluded (superseded, closed, judged by another)
	}
	if job.Kind != kindBaseline {
		// A base commit measured for the check ends its wait; the
		// check's own jobs wait for each other.
		pending, err := s.pending(ctx, cr.JobIDs)
		if err != nil || pending {
			return err
		}
	}
	return s.judgeRow(ctx, cr, job)
}

// judgeRow judges a check run whose jobs have all ended; job is the one
// whose end triggered it (for a base commit measured for the check, that
// job). A finished job's path is one load from the store, one pure
// judgement, one store step (ApplyCheck, carrying every write the
// decision makes): nothing in between reads or writes.
func (s *Service) judgeRow(ctx context.Context, cr store.CheckRun, job store.Job) error {
	l, err := s.load(ctx, cr, job)
	if err != nil {
		return err
	}
	return s.record(ctx, cr, job, l, s.decide(l.in))
}

// checkOf finds the check run row a job reports to, and whether the job
// still counts there (a retest that replaced the row's jobs, or a newer
// baseline measurement, makes it stale).
func (s *Service) checkOf(ctx context.Context, job store.Job) (store.CheckRun, bool, error) {
	var (
		cr  store.CheckRun
		err error
	)
	if job.CheckRunID != 0 {
		cr, err = s.judging().GetCheckRunByID(ctx, job.CheckRunID)
	} else {
		cr, err = s.judging().GetCheckRun(ctx, job.Repo, job.HeadSHA, job.Tier)
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.CheckRun{}, false, nil
	}
	if err != nil {
		return store.CheckRun{}, false, err
	}
	if job.Kind == kindBaseline {
		return cr, s.docOf(cr).BaselineJob == job.ID, nil
	}
	return cr, slices.Contains(cr.JobIDs, job.ID), nil
}

func (s *Service) pending(ctx context.Context, ids []int64) (bool, error) {
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return false, err
		}
		if j.Status == jobstate.Queued || j.Status == jobstate.Running {
			return true, nil
		}
	}
	return false, nil
}

// measureBaseStep queues a measurement of the base commit with the same
// plan, on the card the check's runs used, so the first PR of a
// repository compares against its own base on the same kind of runner
// instead of against nothing. The job is queued by the step itself
// (step.baseJob), which records its ID on the row. ok is false when the
// base commit is already being measured (a retried judgement).
func (s *Service) measureBaseStep(cr store.CheckRun, job store.Job, card string) (step, bool, error) {
	doc := s.docOf(cr)
	if doc.BaselineJob != 0 {
		return step{}, false, nil // already measuring it (a retried judgement)
	}
	if job.BaseSHA == "" {
		return step{ev: checkstate.Event{Kind: checkstate.GateUndecided}, out: check.Output{
			Title:   "No baseline",
			Summary: fmt.Sprintf("There is no `%s` baseline for this repository yet and this run has no base commit to measure. Promote one with `perfgate baseline promote`.", cr.Tier),
		}}, true, nil
	}
	snap, err := snapshotOf(job)
	if err != nil {
		return step{}, false, err
	}
	snap.HeadSHA = job.BaseSHA
	snapshot, err := snap.encode()
	if err != nil {
		return step{}, false, err
	}
	return step{ev: checkstate.Event{Kind: checkstate.Progressed}, doc: &doc,
		baseJob: &store.JobSpec{
			Tier: job.Tier, Kind: kindBaseline, Repo: job.Repo, InstallationID: job.InstallationID, PRNumber: job.PRNumber,
			HeadSHA: job.BaseSHA, BaseSHA: job.BaseSHA, Config: snapshot, Labels: job.Labels, GPUUUID: card,
			CheckRunID: cr.ID,
		},
		out: check.Output{
			Title:   "Measuring the baseline",
			Summary: fmt.Sprintf("There is no `%s` baseline yet, so perfgate is measuring the base commit `%s` on the same runner class; the comparison follows.", cr.Tier, rev.Short(job.BaseSHA)),
		}}, true, nil
}

// publishStep is the gate's verdict as a lifecycle step: the check's new
// phase, its rendered table, and for a fresh regression the one warning
// comment with its deadline — all in one transaction, sent by the outbox.
//
// looks are the budgets this judgement spent, stored over the check's so
// the next look at the commit (a retest, an appeal) continues from them;
// accepted are the commit's accepted appeals the load read; facts, what
// it read for a regression's notes and profiling pass (loadFindings).
func (s *Service) publishStep(ctx context.Context, cr store.CheckRun, job store.Job, accepted []string, facts *regressionFacts, rep *gate.Report, env *result.Environment, notes []string, looks map[string]gate.Looks, settings *result.SettingsDiff) (step, error) {
	prior := s.docOf(cr)
	doc := verdictDoc{Report: rep, Env: env, Notes: notes, After: escalateAfter(job), Author: prior.Author, Looks: prior.Looks, Settings: settings}.withLooks(looks)
	if doc.Author == "" {
		doc.Author = s.authorOf(ctx, cr)
	}
	// Inconclusive on a needs_ack tier holds the check (action required).
	ev := checkstate.Event{Kind: checkstate.GateUndecided, NeedsAck: rep.NeedsAck()}
	var profileJob *store.JobSpec
	switch rep.Verdict {
	case gate.Pass:
		ev.Kind = checkstate.GatePass
	case gate.Regression:
		ev = checkstate.Event{Kind: checkstate.GateRegression, EscalateAfter: doc.After}
		// An appeal accepted while its retest was still running holds too.
		var acceptedBy []string
		if prior.Held == "" {
			acceptedBy = accepted
			ev.AcceptedOnAppeal = len(acceptedBy) > 0
		}
		if prior.Held == string(check.Accepted) || ev.AcceptedOnAppeal {
			doc.Notes = append(doc.Notes, acceptedNotes(prior.Notes)...)
			doc.Notes = append(doc.Notes, acceptedBy...)
		}
		var extra []string
		extra, profileJob = s.regressionNotes(ctx, cr, job, rep, facts)
		doc.Notes = append(doc.Notes, extra...)
		doc.Cost = costOf(job, rep)
	}
	// A row that changed meanwhile (a retest replaced its jobs, another
	// replica judged it) is judged again as it now is.
	// A new or changed settings diff is annotated on the PR's lines once.
	annotate := settings != nil && !reflect.DeepEqual(settings, prior.Settings)
	return step{ev: ev, doc: &doc, annotate: annotate, profileJob: profileJob, detail: costDetail(map[string]any{"runs": rep.CandidateRuns}, doc.Cost)}, nil
}

// authorOf asks GitHub for the PR's author, for the warning's mention. It
// is a courtesy: without GitHub the comment names no one.
func (s *Service) authorOf(ctx context.Context, cr store.CheckRun) string {
	if cr.PRNumber <= 0 {
		return ""
	}
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return ""
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	pr, _, err := client.PullRequests.Get(ctx, owner, repo, cr.PRNumber)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("look up the PR's author")
		return ""
	}
	return pr.GetUser().GetLogin()
}

// standingStep answers a look the pull request's plan has no room for and no
// new evidence to start another: the verdict its last look gave stands.
func (s *Service) standingStep(ctx context.Context, cr store.CheckRun, job store.Job, accepted []string, facts *regressionFacts, key string) (step, error) {
	prior := s.docOf(cr)
	if prior.Report == nil {
		return brokenStep(cr, true, []string{fmt.Sprintf("the looks of this pull request's plan for %s are spent and no verdict is stored", key)})
	}
	notes := append(append([]string{}, prior.Notes...), "all looks of this pull request's plan are spent and nothing new was measured: the last verdict stands (`/perf retest` measures again under a new plan; `/perf ack` accepts an inconclusive one)")
	return s.publishStep(ctx, cr, job, accepted, facts, prior.Report, prior.Env, notes, nil, prior.Settings)
}

// extendStep adds runs to an inconclusive comparison, on the same card
// (card, the one the check's runs used). The look just taken is
// recorded: the decision on all the runs is the next.
func extendStep(cr store.CheckRun, job store.Job, card string, more int, looks map[string]gate.Looks) (step, error) {
	snap, err := snapshotOf(job)
	if err != nil {
		return step{}, err
	}
	snap.Repeats = more
	what := fmt.Sprintf("%d more runs", more)
	if snap.Interleave != nil {
		il := *snap.Interleave
		il.Pairs = min(more, agentapi.MaxPairs)
		snap.Interleave = &il
		what = fmt.Sprintf("%d more base/head pairs", il.Pairs)
	}
	snap.GPUUUID = card
	snapshot, err := snap.encode()
	if err != nil {
		return step{}, err
	}
	return step{
		ev:     checkstate.Event{Kind: checkstate.Progressed},
		docFor: func(doc verdictDoc) verdictDoc { return doc.withLooks(looks) },
		jobs: []store.JobSpec{{
			Tier: job.Tier, Kind: kindExtend, Repo: job.Repo, InstallationID: job.InstallationID, PRNumber: job.PRNumber,
			HeadSHA: cr.HeadSHA, BaseSHA: job.BaseSHA, Config: snapshot, Labels: job.Labels, GPUUUID: snap.GPUUUID,
		}},
		out: check.Output{
			Title:   "Adding runs",
			Summary: fmt.Sprintf("The runs so far could not settle the comparison; perfgate is adding %s on the same card (within the tier's settle_gpu_minutes) and will decide on all of them.", what),
		},
	}, nil
}

// broken concludes a check that has no comparison to show, quoting why.
func (s *Service) broken(ctx context.Context, cr store.CheckRun, runnerFault bool, reasons []string) error {
	st, err := brokenStep(cr, runnerFault, reasons)
	if err != nil {
		return err
	}
	return s.settle(ctx, cr, st)
}

// brokenStep is the step that concludes a check with no comparison.
func brokenStep(cr store.CheckRun, runnerFault bool, reasons []string) (step, error) {
	c, err := report.RenderCheck(report.View{Tier: cr.Tier, Verdict: report.Broken, SHA: cr.HeadSHA, Problems: reasons})
	if err != nil {
		return step{}, err
	}
	return step{
		ev:     checkstate.Event{Kind: checkstate.Broken, RunnerFault: runnerFault},
		out:    check.Output{Title: "The benchmark failed", Summary: c.Summary, Text: c.Text},
		detail: map[string]any{"reasons": reasons},
	}, nil
}

// acceptedNotes are the notes an accepted appeal added to a verdict.
func acceptedNotes(notes []string) []string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, acceptedNotePrefix) {
			out = append(out, n)
		}
	}
	return out
}
