package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/longrun"
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

// longRunDoc is what a capacity check keeps beside its verdict document
// (verdictDoc.Report, which every surface prints): the first sweep of each
// side, from which the web check page draws the latency–throughput curve
// (capacity.SVG), and their table for the maintainer's details. A soak
// keeps nothing beside its document.
type longRunDoc struct {
	Markdown  string          `json:"markdown,omitempty"`
	BaseSweep *capacity.Sweep `json:"base_sweep,omitempty"`
	HeadSweep *capacity.Sweep `json:"head_sweep,omitempty"`
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
		doc.Report, doc.LongRun = nil, nil
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
		rep *gate.Report
		doc *longRunDoc
	)
	if job.Kind == agentapi.KindSoak {
		rep, err = s.judgeSoakCheck(ctx, job)
	} else {
		rep, doc, err = s.judgeCapacityCheck(ctx, job)
	}
	if err != nil {
		return s.broken(ctx, cr, true, []string{fmt.Sprintf("perfgate could not judge job %d: %v", job.ID, err)})
	}
	ev := longRunEvent(rep)
	ev.EscalateAfter = escalateAfter(job)
	if rep.Rule == gate.RuleRecorded && cr.PRNumber <= 0 {
		// The nightly's sweep of the branch head: its knee is a series,
		// the value the document's row holds.
		p := store.TrendPoint{Repo: cr.Repo, Key: string(check.TierCapacity), Metric: config.SustainableRate,
			Date: s.now().UTC().Truncate(24 * time.Hour), Value: rep.Metrics[0].Candidate, JobID: job.ID}
		if err := s.timing().PutTrend(ctx, p); err != nil {
			return fmt.Errorf("record the knee of job %d: %w", job.ID, err)
		}
	}
	zerolog.Ctx(ctx).Info().Int64("job_id", job.ID).Str("tier", cr.Tier).Str("event", string(ev.Kind)).Str("headline", rep.Headline).Msg("long run judged")
	return s.settle(ctx, cr, step{
		ev: ev,
		docFor: func(d verdictDoc) verdictDoc {
			d.Report, d.LongRun, d.After = rep, doc, ev.EscalateAfter
			return d
		},
		detail: map[string]any{"headline": rep.Headline},
	})
}

// longRunEvent is what a long run's verdict does to its check: a
// regression warns (and escalates, as any regression); a verdict that
// cannot tell is undecided (neutral), never a pass.
func longRunEvent(rep *gate.Report) checkstate.Event {
	switch rep.Verdict {
	case gate.Regression:
		return checkstate.Event{Kind: checkstate.GateRegression}
	case gate.Pass:
		return checkstate.Event{Kind: checkstate.GatePass}
	}
	return checkstate.Event{Kind: checkstate.GateUndecided}
}

// judgeCapacityCheck is a capacity job's verdict document and the sweeps
// the check page draws.
func (s *Service) judgeCapacityCheck(ctx context.Context, job store.Job) (*gate.Report, *longRunDoc, error) {
	v, err := JudgeCapacity(ctx, s.st, s.longRunFiles().Files, job)
	if err != nil {
		return nil, nil, err
	}
	return v.Report, &longRunDoc{Markdown: v.Markdown, BaseSweep: v.Base, HeadSweep: v.Head}, nil
}

// judgeSoakCheck is a soak job's verdict document: a failed trend (a leak,
// drift, creep) is a regression of the head.
func (s *Service) judgeSoakCheck(ctx context.Context, job store.Job) (*gate.Report, error) {
	run, err := JudgeSoak(ctx, s.st, s.longRunFiles().Files, job)
	if err != nil {
		return nil, err
	}
	return longrun.Soak(run.Report)
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
