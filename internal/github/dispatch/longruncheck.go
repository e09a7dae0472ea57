package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// longRunDoc is what a capacity or soak check keeps of its verdict, so a
// later step (the escalation, an accepted appeal) and the web check page
// show it without reading the artifacts again.
type longRunDoc struct {
	// Headline is the verdict in one line ("sustainable rate 18.6 → 7.4
	// req/s (−60%)"); Markdown the check's text (the table).
	Headline string `json:"headline"`
	Markdown string `json:"markdown"`
	// Capacity: the comparison of the knees and the first sweep of each
	// side, from which the web check page draws the latency–throughput
	// curve (capacity.SVG); the dashboard reads the head's knee.
	Capacity  *capacity.Comparison `json:"capacity,omitempty"`
	BaseSweep *capacity.Sweep      `json:"base_sweep,omitempty"`
	HeadSweep *capacity.Sweep      `json:"head_sweep,omitempty"`
	// Soak: whether every trend passed.
	SoakPass *bool `json:"soak_pass,omitempty"`
}

// requestLongRun records a capacity or soak check run and its one job, in
// one transaction, as RequestRun does for the gate's tiers. The plan comes
// from the config's capacity: or soak: section.
func (s *Service) requestLongRun(ctx context.Context, req request.Run, cfg *config.Config) error {
	kind := string(req.Tier)
	return s.retryCAS(ctx, func() (bool, error) {
		prev, found, err := s.row(ctx, req.FullName(), req.HeadSHA, kind)
		if err != nil {
			return false, err
		}
		key := requestKey(req.DeliveryID, req.Tier)
		if found && key != "" && prev.RequestKey == key {
			return true, nil
		}
		plan, err := agentapi.LongRunPlanAt(cfg, kind, agentapi.Commits{Repo: req.FullName(), Head: req.HeadSHA, Base: req.BaseSHA})
		if err != nil {
			return false, backoff.Permanent(fmt.Errorf("plan %s tier: %w", kind, err))
		}
		snap := snapshot{Plan: plan, Gate: &gateRules{Tier: config.Tier{Name: kind}, EscalateAfter: cfg.EscalateAfter.D()}, Price: priceFrom(cfg)}
		raw, err := snap.encode()
		if err != nil {
			return false, err
		}
		spec := store.JobSpec{Tier: kind, Kind: kind, Repo: req.FullName(), InstallationID: req.InstallationID, PRNumber: req.PR,
			HeadSHA: req.HeadSHA, BaseSHA: plan.BaseSHA, Config: raw, Labels: cfg.Runner.Labels, GPUUUID: cfg.Runner.GPUUUID}
		if !found {
			prev = store.CheckRun{Repo: req.FullName(), HeadSHA: req.HeadSHA, Tier: kind}
		}
		prev.PRNumber, prev.InstallationID = req.PR, req.InstallationID
		doc := s.docOf(prev)
		doc.LongRun = nil
		if req.Author != "" {
			doc.Author = req.Author
		}
		what := fmt.Sprintf("Waiting for a runner to sweep `%s` and `%s` to their capacity knees.", rev.Short(req.HeadSHA), rev.Short(plan.BaseSHA))
		if plan.Soak != nil {
			what = fmt.Sprintf("Waiting for a runner to soak `%s` for %s at %g requests/s.", rev.Short(req.HeadSHA), plan.Soak.Duration.D(), plan.Soak.Rate)
		} else if plan.BaseSHA == "" {
			what = fmt.Sprintf("Waiting for a runner to sweep `%s` to its capacity knee.", rev.Short(req.HeadSHA))
		}
		_, applied, err := s.apply(ctx, prev, step{
			ev:     checkstate.Event{Kind: checkstate.Requested, Tier: kind},
			doc:    &doc,
			out:    check.Output{Title: "Queued", Summary: what},
			jobIDs: []int64{},
			jobs:   []store.JobSpec{spec},
			key:    key,
			// An open long run replaced by this one stops: hours of a card.
			cancelReason: fmt.Sprintf("replaced by a newer run of %s (%s)", rev.Short(req.HeadSHA), req.Trigger),
			replaced:     [2]string{"Replaced by a newer run", fmt.Sprintf("A newer run of `%s` (%s) replaced this one before it finished; see the latest `%s` check.", rev.Short(req.HeadSHA), req.Trigger, check.CheckName(req.Tier))},
			actor:        req.RequestedBy,
			action:       "run.requested",
			detail:       map[string]any{"trigger": req.Trigger, "delivery": req.DeliveryID, "jobs": 1},
		})
		return applied, err
	})
}

// longRunDone takes a finished capacity or soak job: the check run it
// reports to concludes with its verdict; a job queued without a check run
// (by hand) gets its verdict as a PR comment.
func (s *Service) longRunDone(ctx context.Context, job store.Job) error {
	if job.Status == jobstate.Cancelled {
		return nil
	}
	cr, ok, err := s.checkOf(ctx, job)
	if err != nil {
		return err
	}
	if !ok {
		if job.Kind == agentapi.KindSoak {
			return s.soakDone(ctx, job, s.longRunFiles())
		}
		return s.capacityDone(ctx, job, s.longRunFiles())
	}
	if !check.Phase(cr.State).Open() {
		return nil
	}
	if job.Status != jobstate.Succeeded {
		reason := job.FailureReason
		if reason == "" {
			reason = fmt.Sprintf("job %d ended %s", job.ID, job.Status)
		}
		return s.broken(ctx, cr, isAgentLost(reason), []string{reason})
	}
	var (
		doc longRunDoc
		ev  checkstate.Event
	)
	if job.Kind == agentapi.KindSoak {
		doc, ev, err = s.judgeSoakCheck(ctx, job)
	} else {
		doc, ev, err = s.judgeCapacityCheck(ctx, job)
	}
	if err != nil {
		return s.broken(ctx, cr, true, []string{fmt.Sprintf("perfgate could not judge job %d: %v", job.ID, err)})
	}
	ev.EscalateAfter = escalateAfter(job)
	if doc.Capacity != nil && doc.BaseSweep == nil && cr.PRNumber <= 0 {
		// The nightly's sweep of the branch head: its knee is a series.
		p := store.TrendPoint{Repo: cr.Repo, Key: string(check.TierCapacity), Metric: config.SustainableRate,
			Date: s.now().UTC().Truncate(24 * time.Hour), Value: doc.Capacity.Head.Median, JobID: job.ID}
		if err := s.timing().PutTrend(ctx, p); err != nil {
			return fmt.Errorf("record the knee of job %d: %w", job.ID, err)
		}
	}
	zerolog.Ctx(ctx).Info().Int64("job_id", job.ID).Str("tier", cr.Tier).Str("event", string(ev.Kind)).Str("headline", doc.Headline).Msg("long run judged")
	return s.settle(ctx, cr, step{
		ev:     ev,
		docFor: func(d verdictDoc) verdictDoc { d.LongRun = &doc; d.After = ev.EscalateAfter; return d },
		detail: map[string]any{"headline": doc.Headline},
	})
}

// judgeCapacityCheck is a capacity job's verdict: a regression of the
// sustainable rate beyond the threshold and the sweeps' spread warns (and
// escalates, as any regression); an inconclusive comparison is neutral.
func (s *Service) judgeCapacityCheck(ctx context.Context, job store.Job) (longRunDoc, checkstate.Event, error) {
	v, err := JudgeCapacity(ctx, s.st, s.longRunFiles().Files, job)
	if err != nil {
		return longRunDoc{}, checkstate.Event{}, err
	}
	c := v.Comparison
	doc := longRunDoc{Markdown: v.Markdown, Capacity: &c, BaseSweep: v.Base, HeadSweep: v.Head,
		Headline: fmt.Sprintf("sustainable rate %.3g → %.3g req/s (%s)", c.Base.Median, c.Head.Median, changeText(c.Change))}
	if v.Base == nil {
		doc.Headline = fmt.Sprintf("sustainable rate %.3g req/s (the head alone)", c.Head.Median)
	}
	if c.Verdict == capacity.Inconclusive && strings.HasPrefix(c.Why, "cannot tell") {
		// A sweep the host distorted has no knee to compare.
		doc.Headline = c.Why
	}
	ev := checkstate.Event{Kind: checkstate.GatePass}
	switch c.Verdict {
	case capacity.Regression:
		ev.Kind = checkstate.GateRegression
	case capacity.Inconclusive:
		ev.Kind = checkstate.GateUndecided
	}
	return doc, ev, nil
}

// judgeSoakCheck is a soak job's verdict: a failed trend (a leak, drift,
// creep) is a regression of the head.
func (s *Service) judgeSoakCheck(ctx context.Context, job store.Job) (longRunDoc, checkstate.Event, error) {
	run, err := JudgeSoak(ctx, s.st, s.longRunFiles().Files, job)
	if err != nil {
		return longRunDoc{}, checkstate.Event{}, err
	}
	var md bytes.Buffer
	if err := soak.Markdown(&md, run.Report); err != nil {
		return longRunDoc{}, checkstate.Event{}, err
	}
	pass := run.Report.Pass
	doc := longRunDoc{Markdown: md.String(), SoakPass: &pass, Headline: soakHeadline(run.Report)}
	ev := checkstate.Event{Kind: checkstate.GatePass}
	if !pass {
		ev.Kind = checkstate.GateRegression
	}
	return doc, ev, nil
}

func soakHeadline(r soak.Report) string {
	var failed []string
	for _, t := range r.Failed() {
		per := fmt.Sprintf("%+.3g", t.PerHour)
		if math.Abs(t.PerHour) >= 1000 {
			per = fmt.Sprintf("%+.0f", t.PerHour)
		}
		failed = append(failed, fmt.Sprintf("%s %s %s/h", t.Name, per, t.Unit))
	}
	if len(failed) == 0 {
		return fmt.Sprintf("no trend over %s", time.Duration(r.DurationS*float64(time.Second)).Round(time.Second))
	}
	return strings.Join(failed, ", ")
}

func changeText(c float64) string {
	if math.IsInf(c, 0) || math.IsNaN(c) {
		return "from none"
	}
	return fmt.Sprintf("%+.0f%%", 100*c)
}

// longRunOutput is what a capacity or soak check shows in phase p.
func longRunOutput(tier string, p check.Phase, doc *longRunDoc) check.Output {
	what := "Capacity"
	if tier == string(check.TierSoak) {
		what = "Soak"
	}
	title := map[check.Phase]string{
		check.Passed:       what + " passed",
		check.Warned:       what + " regression (warning)",
		check.Escalated:    what + " regression (blocking)",
		check.Accepted:     what + " regression accepted",
		check.Inconclusive: what + " inconclusive",
		check.NeedsAck:     what + " inconclusive: needs a maintainer",
	}[p]
	if title == "" {
		title = what + " " + string(p)
	}
	return check.Output{Title: title + ": " + doc.Headline, Summary: doc.Markdown}
}

// longRunComment is the comment that warns the author of a long-run
// regression, or says it now blocks.
func longRunComment(cr store.CheckRun, p check.Phase, doc verdictDoc) string {
	out := longRunOutput(cr.Tier, p, doc.LongRun)
	var b bytes.Buffer
	fmt.Fprintf(&b, "## %s on `%s`: %s\n\n", check.CheckName(check.Tier(cr.Tier)), rev.Short(cr.HeadSHA), out.Title)
	if p == check.Warned && !cr.Deadline.IsZero() {
		fmt.Fprintf(&b, "It does not block yet; unless it is fixed, or accepted on appeal (`/perf appeal <reason>`), it blocks after %s.\n\n", cr.Deadline.UTC().Format("2006-01-02 15:04 UTC"))
	}
	b.WriteString(doc.LongRun.Markdown)
	return b.String()
}

// longRunFiles are the long-run judges' options (EnableLongRun).
func (s *Service) longRunFiles() LongRunOptions {
	if s.longRun == nil {
		return LongRunOptions{}
	}
	return *s.longRun
}

// CapacitySVG is a judged capacity check row's latency–throughput curve
// ("" for any other row), drawn from the sweeps it keeps.
func CapacitySVG(cr store.CheckRun) string {
	var doc struct {
		LongRun *longRunDoc `json:"long_run"`
	}
	if cr.Tier != string(check.TierCapacity) || json.Unmarshal(cr.Verdict, &doc) != nil || doc.LongRun == nil || doc.LongRun.HeadSweep == nil {
		return ""
	}
	var b bytes.Buffer
	if capacity.SVG(&b, doc.LongRun.BaseSweep, doc.LongRun.HeadSweep) != nil {
		return ""
	}
	return b.String()
}
