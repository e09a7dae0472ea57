package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/baseline"
	"github.com/perfgate/perfgate/internal/gate"
	"github.com/perfgate/perfgate/internal/report"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/store"
)

// verdictDoc is what a check run row keeps of its last judgement, enough to
// re-render it (escalation, an accepted appeal) without re-running the gate.
type verdictDoc struct {
	Report *gate.Report        `json:"report,omitempty"`
	Env    *result.Environment `json:"environment,omitempty"`
	Author string              `json:"author,omitempty"`
	After  time.Duration       `json:"escalate_after,omitempty"`
	Notes  []string            `json:"notes,omitempty"`
	// Held is store.CheckEscalated or store.CheckAccepted when an earlier
	// run of this commit reached that state: a re-run that finds the same
	// regression keeps it (still blocking, or still accepted) instead of
	// starting a fresh warning.
	Held string `json:"held,omitempty"`
}

// JobDone is the agent API's hook: a job finished, failed or was given up
// on. When every job of its check run is done, the check is judged.
func (s *Service) JobDone(ctx context.Context, job store.Job) {
	log := s.log.With().Int64("job_id", job.ID).Str("repo", job.Repo).Int("pr", job.PRNumber).Str("tier", job.Tier).Logger()
	ctx = log.WithContext(ctx)
	if err := s.jobDone(ctx, job); err != nil {
		log.Error().Err(err).Msg("judge finished job")
	}
}

func (s *Service) jobDone(ctx context.Context, job store.Job) error {
	if job.Status == store.StatusCancelled {
		return nil // superseded: the newer commit has its own check
	}
	cr, err := s.checkOf(ctx, job)
	if errors.Is(err, store.ErrNotFound) {
		return nil // a job with no check run (queued by hand or by the demo)
	}
	if err != nil {
		return err
	}
	if cr.State == checkSuperseded {
		return nil // a newer push replaced the commit; its check is concluded
	}
	if job.Kind == kindBaseline {
		return s.baselineDone(ctx, cr, job)
	}
	pending, err := s.pending(ctx, cr.JobIDs)
	if err != nil || pending {
		return err
	}
	if cells, err := s.cellsOf(ctx, cr.JobIDs); err != nil || isMatrix(cells) {
		if err != nil {
			return err
		}
		return s.judgeMatrix(ctx, cr, job, cells)
	}
	cand, failures, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	if len(cand) == 0 {
		return s.fail(ctx, cr, job, failures)
	}
	snap, err := baseline.Latest(ctx, s.st, cr.Repo, cr.Tier)
	if errors.Is(err, store.ErrNotFound) {
		return s.measureBaseline(ctx, cr, job)
	}
	if err != nil {
		return err
	}
	return s.judge(ctx, cr, job, snap.Runs, cand, nil)
}

// checkOf finds the check run row a job reports to.
func (s *Service) checkOf(ctx context.Context, job store.Job) (store.CheckRun, error) {
	if job.CheckRunID != 0 {
		if cr, err := s.st.CheckRunByGitHubID(ctx, job.CheckRunID); err == nil {
			return cr, nil
		}
	}
	return s.st.GetCheckRun(ctx, job.Repo, job.HeadSHA, job.Tier)
}

func (s *Service) pending(ctx context.Context, ids []int64) (bool, error) {
	for _, id := range ids {
		j, err := s.st.GetJob(ctx, id)
		if err != nil {
			return false, err
		}
		if j.Status == store.StatusQueued || j.Status == store.StatusRunning {
			return true, nil
		}
	}
	return false, nil
}

// runsOf decodes the measured runs of the succeeded jobs and collects the
// failure reasons of the others.
func (s *Service) runsOf(ctx context.Context, ids []int64) ([]*result.Result, []string, error) {
	var runs []*result.Result
	var failures []string
	for _, id := range ids {
		j, err := s.st.GetJob(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if j.Status != store.StatusSucceeded {
			if j.FailureReason != "" {
				failures = append(failures, fmt.Sprintf("job %d: %s", j.ID, j.FailureReason))
			}
			continue
		}
		res, err := s.st.ListResults(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range res {
			if r.Kind != store.KindMeasured || r.Attempt != j.Attempts {
				continue // warm-ups, and runs of an attempt that was lost
			}
			rr, err := result.Parse(r.Samples)
			if err != nil {
				return nil, nil, fmt.Errorf("decode result %d of job %d: %w", r.ID, id, err)
			}
			runs = append(runs, rr)
		}
	}
	return runs, failures, nil
}

// measureBaseline queues a measurement of the base commit with the same
// plan, so the first PR of a repository compares against its own base on
// the same kind of runner instead of against nothing.
func (s *Service) measureBaseline(ctx context.Context, cr store.CheckRun, job store.Job) error {
	if job.BaseSHA == "" {
		return s.conclude(ctx, cr, app.VerdictInconclusive, store.CheckInconclusive, app.Output{
			Title:   "No baseline",
			Summary: fmt.Sprintf("There is no `%s` baseline for this repository yet and this run has no base commit to measure. Promote one with `perfgate baseline promote`.", cr.Tier),
		}, nil)
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
	bj, err := s.st.Enqueue(ctx, store.JobSpec{
		Tier: job.Tier, Kind: kindBaseline, Repo: job.Repo, InstallationID: job.InstallationID, PRNumber: job.PRNumber,
		HeadSHA: job.BaseSHA, BaseSHA: job.BaseSHA, Config: snapshot, Labels: job.Labels, GPUUUID: s.cardOf(ctx, cr.JobIDs),
		CheckRunID: cr.GitHubID,
	})
	if err != nil {
		return fmt.Errorf("enqueue baseline job: %w", err)
	}
	zerolog.Ctx(ctx).Info().Int64("baseline_job", bj.ID).Str("base_sha", job.BaseSHA).Msg("no baseline: measuring the base commit")
	return s.update(ctx, cr, app.Output{
		Title:   "Measuring the baseline",
		Summary: fmt.Sprintf("There is no `%s` baseline yet, so perfgate is measuring the base commit `%s` on the same runner class; the comparison follows.", cr.Tier, short(job.BaseSHA)),
	})
}

// baselineDone promotes the base commit's runs (under the baseline rules)
// and judges the waiting check against them.
func (s *Service) baselineDone(ctx context.Context, cr store.CheckRun, job store.Job) error {
	base, failures, err := s.runsOf(ctx, []int64{job.ID})
	if err != nil {
		return err
	}
	if len(base) == 0 {
		// The PR's own runs succeeded; a base commit that cannot be
		// measured is not its fault, so this does not block it.
		return s.broken(ctx, cr, app.VerdictInconclusive, store.CheckInconclusive,
			append([]string{"the baseline measurement of the base commit failed"}, failures...))
	}
	cand, _, err := s.runsOf(ctx, cr.JobIDs)
	if err != nil {
		return err
	}
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	var notes []string
	meta := baseline.Meta{Repo: job.Repo, Key: job.Tier, Version: "base-" + short(job.HeadSHA), Commit: job.HeadSHA, By: "perfgate",
		Reason: fmt.Sprintf("first baseline, measured for PR #%d", job.PRNumber)}
	if _, _, err := baseline.Promote(ctx, s.st, base, meta, tier); err != nil {
		notes = append(notes, "the base commit's runs were compared but not stored as the baseline: "+err.Error())
	} else {
		notes = append(notes, fmt.Sprintf("baseline: the base commit %s, measured for this PR and promoted as the first `%s` baseline", short(job.HeadSHA), job.Tier))
	}
	return s.judge(ctx, cr, job, base, cand, notes)
}

// judge runs the gate and reports the verdict on the check run.
func (s *Service) judge(ctx context.Context, cr store.CheckRun, job store.Job, base, cand []*result.Result, notes []string) error {
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	rep, err := gate.Compare(base, cand, tier, gate.Options{})
	if err != nil {
		return s.fail(ctx, cr, job, []string{"compare: " + err.Error()})
	}
	if rep.Verdict == gate.Inconclusive && rep.NeedMoreRuns > len(cand) && !s.extended(ctx, cr.JobIDs) {
		return s.extend(ctx, cr, job, rep.NeedMoreRuns-len(cand))
	}
	if s.onDefaultBranch(ctx, cr) {
		s.recordTrend(ctx, cr, cr.Tier, job.ID, cand, tier)
	}
	return s.publish(ctx, cr, job, rep, envOf(cand), notes)
}

// publish stores a verdict on the check run row, renders it on GitHub and,
// for a fresh regression, posts the one warning comment with its deadline.
func (s *Service) publish(ctx context.Context, cr store.CheckRun, job store.Job, rep *gate.Report, env *result.Environment, notes []string) error {
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return err
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	doc := verdictDoc{Report: rep, Env: env, Notes: notes, After: escalateAfter(job)}
	var prior verdictDoc
	if len(cr.Verdict) > 0 {
		_ = json.Unmarshal(cr.Verdict, &prior) // an unreadable verdict holds nothing
	}
	held := prior.Held
	if cr.State == store.CheckEscalated || cr.State == store.CheckAccepted {
		held = cr.State
	}
	// An appeal accepted while its retest was still running holds too.
	var acceptedBy []string
	if held == "" && rep.Verdict == gate.Regression {
		if acceptedBy = s.acceptedAppeals(ctx, cr); len(acceptedBy) > 0 {
			held = store.CheckAccepted
		}
	}
	if cr.PRNumber > 0 {
		if pr, _, err := client.PullRequests.Get(ctx, owner, repo, cr.PRNumber); err == nil {
			doc.Author = pr.GetUser().GetLogin()
		}
	}
	state, deadline := store.CheckInconclusive, time.Time{}
	switch rep.Verdict {
	case gate.Pass:
		state = store.CheckPassed
		if cr.State == store.CheckWarned || cr.State == store.CheckEscalated || !cr.Deadline.IsZero() {
			s.audit(ctx, "perfgate", "regression.resolved", cr.Repo, cr.PRNumber, map[string]any{"sha": cr.HeadSHA, "tier": cr.Tier})
		}
	case gate.Regression:
		switch held {
		case store.CheckEscalated, store.CheckAccepted:
			// Confirmed on a re-run: still blocking, or still accepted.
			state, doc.Held = held, held
			if held == store.CheckAccepted {
				doc.Notes = append(doc.Notes, acceptedNotes(prior.Notes)...)
				doc.Notes = append(doc.Notes, acceptedBy...)
			}
		default:
			// A deadline already past (a retest was still running when it
			// came) is escalated by the next escalation pass.
			state, deadline = store.CheckWarned, cr.Deadline
			if deadline.IsZero() {
				deadline = s.now().Add(doc.After)
			}
		}
	}
	raw, _ := json.Marshal(doc)
	// A retest may have replaced the row (new jobs, new GitHub check run)
	// while this verdict was computed: then this verdict is stale and the
	// retest's jobs will be judged when they finish. The store has no row
	// version, so a window of one read remains.
	if now, err := s.st.GetCheckRun(ctx, cr.Repo, cr.HeadSHA, cr.Tier); err == nil &&
		(now.GitHubID != cr.GitHubID || len(now.JobIDs) != len(cr.JobIDs)) {
		zerolog.Ctx(ctx).Info().Int64("check_run_id", cr.GitHubID).Msg("check run replaced while judging: verdict dropped")
		return nil
	}
	wasWarned := !cr.Deadline.IsZero()
	cr.State, cr.Deadline, cr.Verdict = state, deadline, raw
	if cr, err = s.st.PutCheckRun(ctx, cr); err != nil {
		return err
	}
	v := s.view(cr, doc)
	if err := s.render(ctx, client, cr, v); err != nil {
		return err
	}
	if state == store.CheckWarned && !wasWarned && cr.PRNumber > 0 {
		body, err := report.RenderComment(v)
		if err != nil {
			return err
		}
		if _, _, err := client.Issues.CreateComment(ctx, owner, repo, cr.PRNumber, &github.IssueComment{Body: github.String(body)}); err != nil {
			return fmt.Errorf("post warning comment: %w", err)
		}
	}
	s.audit(ctx, "perfgate", "gate."+string(rep.Verdict), cr.Repo, cr.PRNumber, map[string]any{
		"sha": cr.HeadSHA, "tier": cr.Tier, "runs": rep.CandidateRuns, "deadline": deadline,
	})
	return nil
}

// extended reports whether one of the jobs already added runs.
func (s *Service) extended(ctx context.Context, ids []int64) bool {
	for _, id := range ids {
		if j, err := s.st.GetJob(ctx, id); err == nil && j.Kind == kindExtend {
			return true
		}
	}
	return false
}

// extend adds runs to an inconclusive comparison, on the same card.
func (s *Service) extend(ctx context.Context, cr store.CheckRun, job store.Job, more int) error {
	snap, err := snapshotOf(job)
	if err != nil {
		return err
	}
	snap.Repeats = more
	snap.GPUUUID = s.cardOf(ctx, cr.JobIDs)
	snapshot, err := snap.encode()
	if err != nil {
		return err
	}
	ej, err := s.st.Enqueue(ctx, store.JobSpec{
		Tier: job.Tier, Kind: kindExtend, Repo: job.Repo, InstallationID: job.InstallationID, PRNumber: job.PRNumber,
		HeadSHA: cr.HeadSHA, BaseSHA: job.BaseSHA, Config: snapshot, Labels: job.Labels, GPUUUID: snap.GPUUUID, CheckRunID: cr.GitHubID,
	})
	if err != nil {
		return fmt.Errorf("enqueue extension job: %w", err)
	}
	cr.JobIDs = append(cr.JobIDs, ej.ID)
	cr.State = store.CheckInProgress
	if _, err := s.st.PutCheckRun(ctx, cr); err != nil {
		return err
	}
	return s.update(ctx, cr, app.Output{
		Title:   "Adding runs",
		Summary: fmt.Sprintf("The first runs could not settle the comparison; perfgate is adding %d more on the same card and will decide on all of them.", more),
	})
}

// fail concludes a check whose runs could not be measured. A lost agent is
// the runner's fault and stays neutral; an engine that would not start or
// answered errors is the commit's, and fails.
func (s *Service) fail(ctx context.Context, cr store.CheckRun, job store.Job, reasons []string) error {
	if len(reasons) == 0 {
		reason := job.FailureReason
		if reason == "" {
			reason = fmt.Sprintf("job %d ended %s with no measured runs", job.ID, job.Status)
		}
		reasons = []string{reason}
	}
	// Neutral only when every failure was the runner's: one engine failure
	// among them is the commit's, whatever else was lost.
	verdict, state := app.VerdictInconclusive, store.CheckInconclusive
	for _, r := range reasons {
		if !strings.Contains(r, "agent lost") {
			verdict, state = app.VerdictError, store.CheckErrored
		}
	}
	return s.broken(ctx, cr, verdict, state, reasons)
}

// broken concludes a check that has no comparison to show, quoting why.
func (s *Service) broken(ctx context.Context, cr store.CheckRun, verdict app.Verdict, state string, reasons []string) error {
	c, err := report.RenderCheck(report.View{Tier: cr.Tier, Verdict: report.Broken, SHA: cr.HeadSHA, Problems: reasons})
	if err != nil {
		return err
	}
	return s.conclude(ctx, cr, verdict, state, app.Output{Title: "The benchmark failed", Summary: c.Summary, Text: c.Text}, nil)
}

func (s *Service) conclude(ctx context.Context, cr store.CheckRun, v app.Verdict, state string, out app.Output, verdict json.RawMessage) error {
	cr.State, cr.Deadline = state, time.Time{}
	if verdict != nil {
		cr.Verdict = verdict
	}
	if _, err := s.st.PutCheckRun(ctx, cr); err != nil {
		return err
	}
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return err
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	return s.checks.Complete(ctx, client, owner, repo, cr.GitHubID, app.Tier(cr.Tier), v, out)
}

// update rewrites an open check's output and marks it in progress.
func (s *Service) update(ctx context.Context, cr store.CheckRun, out app.Output) error {
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err != nil {
		return err
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	return s.checks.Start(ctx, client, owner, repo, cr.GitHubID, app.Tier(cr.Tier), out)
}

// view builds the report for a check run row's current state.
func (s *Service) view(cr store.CheckRun, doc verdictDoc) report.View {
	v := report.View{SHA: cr.HeadSHA, Author: doc.Author, Deadline: cr.Deadline, EscalateAfter: doc.After, Notes: doc.Notes}
	if doc.Report != nil {
		v = report.FromGate(v, doc.Report, doc.Env)
		v.Verdict = report.VerdictOf(doc.Report.Verdict)
	}
	v.Tier = cr.Tier
	switch cr.State {
	case store.CheckEscalated:
		v.Verdict = report.Escalated
	case store.CheckAccepted:
		v.Verdict = report.Accepted
	}
	return v
}

// render writes the view onto the GitHub check run.
func (s *Service) render(ctx context.Context, client *github.Client, cr store.CheckRun, v report.View) error {
	c, err := report.RenderCheck(v)
	if err != nil {
		return err
	}
	owner, repo, _ := strings.Cut(cr.Repo, "/")
	return s.checks.Complete(ctx, client, owner, repo, cr.GitHubID, app.Tier(cr.Tier), appVerdict(v.Verdict),
		app.Output{Title: c.Title, Summary: c.Summary, Text: c.Text})
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

func appVerdict(v report.Verdict) app.Verdict {
	switch v {
	case report.Pass, report.Accepted:
		return app.VerdictPass
	case report.Warning:
		return app.VerdictWarning
	case report.Escalated:
		return app.VerdictEscalated
	case report.Skipped:
		return app.VerdictSkipped
	case report.Broken:
		return app.VerdictError
	}
	return app.VerdictInconclusive
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

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
