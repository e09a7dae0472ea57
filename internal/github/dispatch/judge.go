package dispatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
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
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// judgeStore is what the judge room (judge.go, matrix.go, paired.go,
// trend.go) uses: a check's jobs and their results, the baselines it
// compares against, and the jobs it adds.
type judgeStore interface {
	baseline.Store
	CancelJob(ctx context.Context, jobID int64, reason string) (store.Job, error)
	Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error)
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
	_, applied, err := s.apply(ctx, cr, st)
	if errors.Is(err, errIgnored) {
		return nil
	}
	if err == nil && !applied {
		return errMoved
	}
	return err
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
	if job.Kind == kindBaseline {
		return s.baselineDone(ctx, cr, job)
	}
	pending, err := s.pending(ctx, cr.JobIDs)
	if err != nil || pending {
		return err
	}
	return s.judgeRow(ctx, cr, job)
}

// judgeRow judges a check run whose jobs have all ended; job is one of
// them, for its plan.
func (s *Service) judgeRow(ctx context.Context, cr store.CheckRun, job store.Job) error {
	cells, err := s.cellsOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	if isMatrix(cells) {
		return s.judgeMatrix(ctx, cr, job, cells)
	}
	if il, err := s.interleaved(ctx, cr.JobIDs); err != nil || il {
		if err != nil {
			return err
		}
		return s.judgePaired(ctx, cr, job)
	}
	ev, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	if len(ev.runs) == 0 {
		return s.fail(ctx, cr, job, ev)
	}
	snap, err := baseline.Latest(ctx, s.judging(), cr.Repo, cr.Tier)
	if errors.Is(err, store.ErrNotFound) {
		return s.measureBaseline(ctx, cr, job)
	}
	if err != nil {
		return err
	}
	return s.judge(ctx, cr, job, judgement{key: cr.Tier, base: snap.Runs, against: snap.Version, cand: ev, notes: ev.bad})
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

// evidence is what a set of jobs measured: the runs the gate can use (and
// the session, the job, each ran in), the reasons jobs failed, and the
// runs that cannot be judged.
type evidence struct {
	runs     []*result.Result
	sessions []string // parallel to runs: the job ID each run came from
	failures []string // jobs that failed, with their reasons
	bad      []string // runs whose results cannot be judged, with why
}

// runsOf decodes the measured runs of the succeeded jobs and collects the
// failure reasons of the others. A result that cannot be decoded is left
// out and named, never a reason to leave the check open.
func (s *Service) runsOf(ctx context.Context, ids []int64) (evidence, error) {
	var ev evidence
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return evidence{}, err
		}
		if j.Status != jobstate.Succeeded {
			if j.FailureReason != "" {
				ev.failures = append(ev.failures, fmt.Sprintf("job %d: %s", j.ID, j.FailureReason))
			}
			continue
		}
		res, err := s.judging().ListResults(ctx, id)
		if err != nil {
			return evidence{}, err
		}
		for _, r := range res {
			if r.Kind != jobstate.KindMeasured || r.Attempt != j.Attempts {
				continue // warm-ups, and runs of an attempt that was lost
			}
			if r.Side == agentapi.SideBase {
				continue // an interleaved job's base commit (paired.go judges those)
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				ev.bad = append(ev.bad, fmt.Sprintf("run %d of job %d was left out: its result cannot be judged (%v)", r.RunIndex, id, err))
				continue
			}
			ev.runs = append(ev.runs, rr)
			ev.sessions = append(ev.sessions, strconv.FormatInt(id, 10))
		}
	}
	return ev, nil
}

// measureBaseline queues a measurement of the base commit with the same
// plan, so the first PR of a repository compares against its own base on
// the same kind of runner instead of against nothing.
func (s *Service) measureBaseline(ctx context.Context, cr store.CheckRun, job store.Job) error {
	doc := s.docOf(cr)
	if doc.BaselineJob != 0 {
		return nil // already measuring it (a retried judgement)
	}
	if job.BaseSHA == "" {
		return s.settle(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.GateUndecided}, out: check.Output{
			Title:   "No baseline",
			Summary: fmt.Sprintf("There is no `%s` baseline for this repository yet and this run has no base commit to measure. Promote one with `perfgate baseline promote`.", cr.Tier),
		}})
	}
	snap, err := snapshotOf(job)
	if err != nil {
		return err
	}
	snap.HeadSHA = job.BaseSHA
	snapshot, err := snap.encode()
	if err != nil {
		return err
	}
	bj, err := s.judging().Enqueue(ctx, store.JobSpec{
		Tier: job.Tier, Kind: kindBaseline, Repo: job.Repo, InstallationID: job.InstallationID, PRNumber: job.PRNumber,
		HeadSHA: job.BaseSHA, BaseSHA: job.BaseSHA, Config: snapshot, Labels: job.Labels, GPUUUID: s.cardOf(ctx, cr.JobIDs),
		CheckRunID: cr.ID,
	})
	if err != nil {
		return fmt.Errorf("enqueue baseline job: %w", err)
	}
	zerolog.Ctx(ctx).Info().Int64("baseline_job", bj.ID).Str("base_sha", job.BaseSHA).Msg("no baseline: measuring the base commit")
	doc.BaselineJob = bj.ID
	err = s.settle(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.Progressed}, doc: &doc, out: check.Output{
		Title:   "Measuring the baseline",
		Summary: fmt.Sprintf("There is no `%s` baseline yet, so perfgate is measuring the base commit `%s` on the same runner class; the comparison follows.", cr.Tier, rev.Short(job.BaseSHA)),
	}})
	if errors.Is(err, errMoved) {
		// Not recorded on the row: this measurement is nobody's.
		if _, cerr := s.judging().CancelJob(ctx, bj.ID, "the check it measured for changed"); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	return err
}

// baselineDone promotes the base commit's runs (under the baseline rules)
// and judges the waiting check against them.
func (s *Service) baselineDone(ctx context.Context, cr store.CheckRun, job store.Job) error {
	base, err := s.runsOf(ctx, []int64{job.ID})
	if err != nil {
		return err
	}
	if len(base.runs) == 0 {
		// The PR's own runs succeeded; a base commit that cannot be
		// measured is not its fault, so this does not block it.
		return s.broken(ctx, cr, true, append(append([]string{"the baseline measurement of the base commit failed"}, base.failures...), base.bad...))
	}
	cand, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	notes := cand.bad
	meta := baseline.Meta{Repo: job.Repo, Key: job.Tier, Version: "base-" + rev.Short(job.HeadSHA), Commit: job.HeadSHA, By: "perfgate",
		Reason: fmt.Sprintf("first baseline, measured for PR #%d", job.PRNumber)}
	against := 0
	if saved, _, err := baseline.Promote(ctx, s.judging(), base.runs, meta, tier); err != nil {
		notes = append(notes, "the base commit's runs were compared but not stored as the baseline: "+err.Error())
	} else {
		against = saved.Version
		notes = append(notes, fmt.Sprintf("baseline: the base commit %s, measured for this PR and promoted as the first `%s` baseline", rev.Short(job.HeadSHA), job.Tier))
	}
	if len(cand.runs) == 0 {
		return s.fail(ctx, cr, job, cand)
	}
	return s.judge(ctx, cr, job, judgement{key: cr.Tier, base: base.runs, against: against, cand: cand, notes: notes})
}

// judgement is one stored-baseline comparison to make: the candidate's
// evidence against a baseline's runs, for one baseline key.
type judgement struct {
	key     string // the baseline key: the tier, or "<tier>/<cell>"
	base    []*result.Result
	against int // the baseline version compared with (left out of the noise history); 0: none stored
	cand    evidence
	notes   []string
}

// options is what production judges key with: the noise history of the
// repository's baselines of the key other than the one compared with, the
// commit's look budget as this check spent it so far, and the session
// (job) of each candidate run.
func (s *Service) options(ctx context.Context, cr store.CheckRun, key string, against int, sessions []string) (gate.Options, error) {
	opt, err := baseline.Options(ctx, s.judging(), cr.Repo, key, against, s.docOf(cr).Looks[key])
	if err != nil {
		return gate.Options{}, err
	}
	opt.CandidateSessions = sessions
	return opt, nil
}

// judge runs the gate and reports the verdict on the check run.
func (s *Service) judge(ctx context.Context, cr store.CheckRun, job store.Job, jm judgement) error {
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	opt, err := s.options(ctx, cr, jm.key, jm.against, jm.cand.sessions)
	if err != nil {
		return err
	}
	opt.Looks = s.prLooks(ctx, cr, jm.key, opt.Looks, jm.cand.runs)
	budget := s.settleBudget(ctx, cr.JobIDs, tier)
	opt, stands := s.nextLook(cr, opt, budget, len(jm.cand.runs))
	if stands {
		return s.standing(ctx, cr, job, jm.key)
	}
	rep, err := gate.Compare(jm.base, jm.cand.runs, tier, opt)
	if err != nil {
		return s.broken(ctx, cr, false, append([]string{"compare: " + err.Error()}, jm.notes...))
	}
	looks := map[string]gate.Looks{jm.key: rep.Looks}
	if more := rep.NeedMoreRuns - rep.CandidateRuns; rep.Verdict == gate.Inconclusive && more > 0 && budget.fits(more) {
		return s.extend(ctx, cr, job, more, looks)
	}
	jm.notes = append(jm.notes, budget.note(rep, envOf(jm.cand.runs))...)
	if s.onDefaultBranch(ctx, cr) {
		s.recordTrend(ctx, cr, cr.Tier, job.ID, jm.cand.runs, tier)
	}
	jm.notes = append(jm.notes, engineFailureNotes(jm.base, jm.cand.runs)...)
	return s.publish(ctx, cr, job, rep, envOf(jm.cand.runs), jm.notes, looks, result.DiffSettings(settingsOf(jm.base), settingsOf(jm.cand.runs)))
}

// publish records the gate's verdict as a lifecycle step: the check's new
// phase, its rendered table, and for a fresh regression the one warning
// comment with its deadline — all in one transaction, sent by the outbox.
//
// looks are the budgets this judgement spent, stored over the check's so
// the next look at the commit (a retest, an appeal) continues from them.
func (s *Service) publish(ctx context.Context, cr store.CheckRun, job store.Job, rep *gate.Report, env *result.Environment, notes []string, looks map[string]gate.Looks, settings *result.SettingsDiff) error {
	prior := s.docOf(cr)
	doc := verdictDoc{Report: rep, Env: env, Notes: notes, After: escalateAfter(job), Author: prior.Author, Looks: prior.Looks, Settings: settings}.withLooks(looks)
	if doc.Author == "" {
		doc.Author = s.authorOf(ctx, cr)
	}
	// Inconclusive on a needs_ack tier holds the check (action required).
	ev := checkstate.Event{Kind: checkstate.GateUndecided, NeedsAck: rep.NeedsAck()}
	switch rep.Verdict {
	case gate.Pass:
		ev.Kind = checkstate.GatePass
	case gate.Regression:
		ev = checkstate.Event{Kind: checkstate.GateRegression, EscalateAfter: doc.After}
		// An appeal accepted while its retest was still running holds too.
		var acceptedBy []string
		if prior.Held == "" {
			acceptedBy = s.acceptedAppeals(ctx, cr)
			ev.AcceptedOnAppeal = len(acceptedBy) > 0
		}
		if prior.Held == string(check.Accepted) || ev.AcceptedOnAppeal {
			doc.Notes = append(doc.Notes, acceptedNotes(prior.Notes)...)
			doc.Notes = append(doc.Notes, acceptedBy...)
		}
		doc.Notes = append(doc.Notes, s.regressionNotes(ctx, cr, job, rep)...)
		doc.Cost = costOf(job, rep)
	}
	// A row that changed meanwhile (a retest replaced its jobs, another
	// replica judged it) is judged again as it now is.
	// A new or changed settings diff is annotated on the PR's lines once.
	annotate := settings != nil && !reflect.DeepEqual(settings, prior.Settings)
	return s.settle(ctx, cr, step{ev: ev, doc: &doc, annotate: annotate, detail: costDetail(map[string]any{"runs": rep.CandidateRuns}, doc.Cost)})
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

// prLooks is the look budget a judgement continues: this check's own,
// else — for a commit that changes no file against an earlier commit of
// the same pull request (an empty commit, a re-push) — the budget that
// commit's check left, so pushing cannot reset the error budget. A commit
// that changes the code is a new question with a budget of its own.
func (s *Service) prLooks(ctx context.Context, cr store.CheckRun, key string, own gate.Looks, runs []*result.Result) gate.Looks {
	if len(own.Spent) > 0 || cr.PRNumber <= 0 {
		return own
	}
	tree := ""
	for _, r := range runs {
		if r != nil && r.Perfgate != nil && r.Perfgate.Environment.SourceTree != "" {
			tree = r.Perfgate.Environment.SourceTree
			break
		}
	}
	if tree == "" {
		return own
	}
	rows, err := s.judging().ListCheckRuns(ctx, cr.Repo, cr.PRNumber)
	if err != nil {
		return own
	}
	var best store.CheckRun
	found := false
	for _, r := range rows {
		if r.ID == cr.ID || r.Tier != cr.Tier || r.HeadSHA == cr.HeadSHA {
			continue
		}
		d := s.docOf(r)
		if d.Env == nil || d.Env.SourceTree != tree || len(d.Looks[key].Spent) == 0 {
			continue
		}
		if !found || r.UpdatedAt.After(best.UpdatedAt) {
			best, found = r, true
		}
	}
	if !found {
		return own
	}
	return s.docOf(best).Looks[key]
}

// settling is what an inconclusive verdict may still spend: the tier's
// settle budget in GPU-minutes per pull request, what the added jobs of
// this check spent of it, and what one more measured run costs on this
// card (the jobs' time on the card per run; a minute when unknown).
type settling struct {
	budget, spent, perRun float64
	interleaved           bool
}

// defaultRunMinutes prices a run when the jobs' times say nothing.
const defaultRunMinutes = 1.0

func (s *Service) settleBudget(ctx context.Context, ids []int64, tier config.Tier) settling {
	b := settling{budget: float64(tier.SettleGPUMinutes)}
	var minutes, runs float64
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			continue
		}
		snap, err := snapshotOf(j)
		if err != nil {
			continue
		}
		n := float64(snap.Repeats)
		if snap.Interleave != nil {
			n, b.interleaved = float64(2*snap.Interleave.Pairs), true
		}
		d := 0.0
		if !j.StartedAt.IsZero() && j.FinishedAt.After(j.StartedAt) {
			d = j.FinishedAt.Sub(j.StartedAt).Minutes()
			minutes += d
			runs += n
		}
		if j.Kind == kindExtend {
			if d == 0 {
				d = n * defaultRunMinutes
			}
			b.spent += d
		}
	}
	b.perRun = defaultRunMinutes
	if minutes > 0 && runs > 0 {
		b.perRun = minutes / runs
	}
	return b
}

// cost is the GPU-minutes of more candidate runs (pairs, when interleaved).
func (b settling) cost(more int) float64 {
	if b.interleaved {
		return b.perRun * float64(2*more)
	}
	return b.perRun * float64(more)
}

// fits reports whether adding more runs (pairs) stays within the budget.
func (b settling) fits(more int) bool { return b.budget > 0 && b.spent+b.cost(more) <= b.budget }

// last reports whether the look at n runs (pairs) is the last the budget
// pays for: the doubling after it would not fit. A tier without a settle
// budget keeps its plan's looks for retests.
func (b settling) last(n int) bool { return b.budget > 0 && !b.fits(n) }

// note says what settling spent and, when the verdict is still open, what
// would settle it.
func (b settling) note(rep *gate.Report, env *result.Environment) []string {
	if b.budget <= 0 || rep.Verdict != gate.Inconclusive {
		return nil
	}
	unit, n := "runs", rep.CandidateRuns
	if b.interleaved {
		unit = "pairs"
	}
	mins := minutesOf(env)
	out := []string{fmt.Sprintf("settling spent %.0f of %.0f %s (settle_gpu_minutes) on added %s; %d more %s (about %.0f %s) would narrow the interval by √2 — a maintainer decides: `/perf ack` to accept, or raise settle_gpu_minutes",
		b.spent, b.budget, mins, unit, n, unit, b.cost(n), mins)}
	if need := rep.RunsToResolve(); need > n {
		// What the noise asks for, against what the budget can buy.
		out = append(out, fmt.Sprintf("at this noise a change of the threshold's size needs about %d %s in all: about %.0f %s more, where the settle budget has %.0f left",
			need, unit, b.cost(need-n), mins, max(b.budget-b.spent, 0)))
	}
	return out
}

// minutesOf names the runner's time the way its runs used it: a runner
// with no real card (the simulated engine, a --fake-gpu runner, none at
// all) spends CPU-minutes, not GPU-minutes.
func minutesOf(env *result.Environment) string {
	if env == nil || env.Sim || env.FakeGPU || env.GPUUUID == "" {
		return "CPU-minutes"
	}
	return "GPU-minutes"
}

// nextLook readies the options of a judgement of n runs (pairs): past the
// plan's last look, afterPlan says what follows (stands: the stored
// verdict stands); otherwise the look is the last when the settle budget
// cannot follow it with another.
func (s *Service) nextLook(cr store.CheckRun, opt gate.Options, budget settling, n int) (gate.Options, bool) {
	if opt.Looks.Final() {
		var stands bool
		if opt, stands = s.afterPlan(cr, opt, n); stands {
			return opt, true
		}
	}
	if !opt.Reuse {
		opt.LastLook = budget.last(n)
	}
	return opt, false
}

// afterPlan decides what a judgement does once the plan's looks are spent.
// New evidence — a maintainer's `/perf retest` after the last look — starts
// a new plan with α of its own (the check states it and the pull request's
// bound). The same evidence again leaves the stored verdict standing; and
// where none was stored (extensions that measured nothing spent the
// looks), it is judged at the last look's levels, spending nothing, so the
// pull request always keeps a verdict.
func (s *Service) afterPlan(cr store.CheckRun, opt gate.Options, have int) (gate.Options, bool) {
	last := opt.Looks.Spent[len(opt.Looks.Spent)-1]
	switch {
	case have > last.CandidateRuns:
		opt.Looks = opt.Looks.NextRound()
		return opt, false
	case s.docOf(cr).Report != nil:
		return opt, true
	}
	opt.Reuse = true
	return opt, false
}

// standing answers a look the pull request's plan has no room for and no
// new evidence to start another: the verdict its last look gave stands.
func (s *Service) standing(ctx context.Context, cr store.CheckRun, job store.Job, key string) error {
	prior := s.docOf(cr)
	if prior.Report == nil {
		return s.broken(ctx, cr, true, []string{fmt.Sprintf("the looks of this pull request's plan for %s are spent and no verdict is stored", key)})
	}
	notes := append(append([]string{}, prior.Notes...), "all looks of this pull request's plan are spent and nothing new was measured: the last verdict stands (`/perf retest` measures again under a new plan; `/perf ack` accepts an inconclusive one)")
	return s.publish(ctx, cr, job, prior.Report, prior.Env, notes, nil, prior.Settings)
}

// extend adds runs to an inconclusive comparison, on the same card. The
// look just taken is recorded: the decision on all the runs is the next.
func (s *Service) extend(ctx context.Context, cr store.CheckRun, job store.Job, more int, looks map[string]gate.Looks) error {
	snap, err := snapshotOf(job)
	if err != nil {
		return err
	}
	snap.Repeats = more
	what := fmt.Sprintf("%d more runs", more)
	if snap.Interleave != nil {
		il := *snap.Interleave
		il.Pairs = min(more, agentapi.MaxPairs)
		snap.Interleave = &il
		what = fmt.Sprintf("%d more base/head pairs", il.Pairs)
	}
	snap.GPUUUID = s.cardOf(ctx, cr.JobIDs)
	snapshot, err := snap.encode()
	if err != nil {
		return err
	}
	return s.settle(ctx, cr, step{
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
	})
}

// fail concludes a check whose runs could not be measured or judged. A
// lost agent or an unreadable result is the runner's fault and stays
// neutral; an engine that would not start or answered errors is the
// commit's, and fails.
func (s *Service) fail(ctx context.Context, cr store.CheckRun, job store.Job, ev evidence) error {
	reasons := append(append([]string{}, ev.failures...), ev.bad...)
	if len(reasons) == 0 {
		reason := job.FailureReason
		if reason == "" {
			reason = fmt.Sprintf("job %d ended %s with no measured runs", job.ID, job.Status)
		}
		reasons = []string{reason}
		ev.failures = reasons
	}
	// Neutral only when every failure was the runner's: one engine failure
	// among them is the commit's, whatever else was lost.
	runnerFault := true
	for _, r := range ev.failures {
		if !isAgentLost(r) {
			runnerFault = false
		}
	}
	return s.broken(ctx, cr, runnerFault, reasons)
}

// broken concludes a check that has no comparison to show, quoting why.
func (s *Service) broken(ctx context.Context, cr store.CheckRun, runnerFault bool, reasons []string) error {
	c, err := report.RenderCheck(report.View{Tier: cr.Tier, Verdict: report.Broken, SHA: cr.HeadSHA, Problems: reasons})
	if err != nil {
		return err
	}
	return s.settle(ctx, cr, step{
		ev:     checkstate.Event{Kind: checkstate.Broken, RunnerFault: runnerFault},
		out:    check.Output{Title: "The benchmark failed", Summary: c.Summary, Text: c.Text},
		detail: map[string]any{"reasons": reasons},
	})
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

// settingsOf is what the engine ran with in the side's last run that
// recorded it (the head side's carries the pull request's knob lines).
func settingsOf(runs []*result.Result) *result.EngineSettings {
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r != nil && r.Perfgate != nil && r.Perfgate.Settings != nil {
			return r.Perfgate.Settings
		}
	}
	return nil
}

// engineFailureNotes name the prompts the engine itself ended early, on
// each side: those that failed in every run apart from transient ones.
func engineFailureNotes(base, head []*result.Result) []string {
	var out []string
	out = append(out, result.FailuresByPrompt(base).Notes("base")...)
	return append(out, result.FailuresByPrompt(head).Notes("head")...)
}

func envOf(runs []*result.Result) *result.Environment {
	for _, r := range runs {
		if r.Perfgate != nil {
			e := r.Perfgate.Environment
			return &e
		}
	}
	return nil
}
