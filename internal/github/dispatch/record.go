package dispatch

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// minutesOf names the runner's time the way its runs used it (see
// judge.MinutesOf).
var minutesOf = judge.MinutesOf

// record stores a judgement: the trend points and first baselines it
// asks for, then the one lifecycle step its outcome is — the verdict
// published, runs added, the last verdict standing, the check concluded
// as broken, or the base commit queued for measuring.
func (s *Service) record(ctx context.Context, cr store.CheckRun, job store.Job, in judge.Input, d judge.Decision) error {
	for _, t := range d.Trends {
		s.recordTrend(ctx, cr, t.Key, t.Job, t.Runs, in.Tier)
	}
	for _, p := range d.Promotions {
		note := s.promote(ctx, cr, job, in, p)
		switch {
		case p.At < 0:
		case d.Outcome == judge.Publish && p.At < len(d.Notes):
			d.Notes[p.At] = note
		case d.Outcome == judge.Broken && p.At < len(d.Reasons):
			d.Reasons[p.At] = note
		}
	}
	switch d.Outcome {
	case judge.Publish:
		return s.publish(ctx, cr, job, d.Report, d.Env, d.Notes, d.Looks, d.Settings)
	case judge.Extend:
		return s.extend(ctx, cr, job, d.More, d.Looks)
	case judge.Stands:
		return s.standing(ctx, cr, job, d.Key)
	case judge.MeasureBase:
		return s.measureBaseline(ctx, cr, job)
	case judge.Broken:
		return s.broken(ctx, cr, d.RunnerFault, d.Reasons)
	}
	return fmt.Errorf("judge check run %d: unknown outcome %q", cr.ID, d.Outcome)
}

// promote stores runs the judgement found to be a first baseline — a
// nightly matrix cell's first runs, or the base commit measured for a
// check — under the baseline rules, and says how it went.
func (s *Service) promote(ctx context.Context, cr store.CheckRun, job store.Job, in judge.Input, p judge.Promotion) string {
	if p.Label != "" {
		meta := baseline.Meta{Repo: cr.Repo, Key: p.Key, Version: "nightly-" + rev.Short(cr.HeadSHA), Commit: cr.HeadSHA, By: "perfgate", Reason: "first nightly of this matrix cell"}
		if _, _, err := baseline.Promote(ctx, s.judging(), p.Runs, meta, in.Tier); err != nil {
			return fmt.Sprintf("%s: first runs not stored as a baseline: %v", p.Label, err)
		}
		return fmt.Sprintf("%s: first nightly, promoted as the cell's baseline", p.Label)
	}
	meta := baseline.Meta{Repo: job.Repo, Key: job.Tier, Version: "base-" + rev.Short(job.HeadSHA), Commit: job.HeadSHA, By: "perfgate",
		Reason: fmt.Sprintf("first baseline, measured for PR #%d", job.PRNumber)}
	if _, _, err := baseline.Promote(ctx, s.judging(), p.Runs, meta, in.Tier); err != nil {
		return "the base commit's runs were compared but not stored as the baseline: " + err.Error()
	}
	return fmt.Sprintf("baseline: the base commit %s, measured for this PR and promoted as the first `%s` baseline", rev.Short(job.HeadSHA), job.Tier)
}
