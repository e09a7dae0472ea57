package dispatch

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// minutesOf names the runner's time the way its runs used it (see
// judge.MinutesOf).
var minutesOf = judge.MinutesOf

// record stores a judgement as the one lifecycle step its outcome is —
// the verdict published, runs added, the last verdict standing, the check
// concluded as broken, or the base commit queued for measuring — with the
// trend points, first baselines and a regression's profiling pass the
// decision asks for written in the same transaction (one ApplyCheck). It
// reads nothing: what the step needs beside the decision (the card, the
// accepted appeals, the baselines a promotion is checked against, the
// knowledge base and profiling pass a regression's notes go on) was read
// by the load.
func (s *Service) record(ctx context.Context, cr store.CheckRun, job store.Job, l loaded, d judge.Decision) error {
	var (
		trends    []store.TrendPoint
		baselines []store.NewBaseline
	)
	for _, t := range d.Trends {
		trends = append(trends, s.trendPoints(cr, t.Key, t.Job, t.Runs, l.in.Tier)...)
	}
	for _, p := range d.Promotions {
		nb, note := promotionOf(cr, job, l, p)
		if nb != nil {
			baselines = append(baselines, *nb)
		}
		switch {
		case p.At < 0:
		case d.Outcome == judge.Publish && p.At < len(d.Notes):
			d.Notes[p.At] = note
		case d.Outcome == judge.Broken && p.At < len(d.Reasons):
			d.Reasons[p.At] = note
		}
	}
	st, ok, err := s.stepOf(ctx, cr, job, l, d)
	if err != nil || !ok {
		return err
	}
	st.trends, st.baselines = trends, baselines
	row, err := s.settleRow(ctx, cr, st)
	if err == nil && st.baseJob != nil && row.ID != 0 {
		zerolog.Ctx(ctx).Info().Int64("baseline_job", s.docOf(row).BaselineJob).Str("base_sha", job.BaseSHA).Msg("no baseline: measuring the base commit")
	}
	if err == nil && st.profileJob != nil && row.ID != 0 {
		zerolog.Ctx(ctx).Info().Str("head", st.profileJob.HeadSHA).Str("base", st.profileJob.BaseSHA).Str("trigger", "regression").
			Msg("profiling pass queued")
	}
	return err
}

// stepOf is the lifecycle step a decision's outcome is; ok is false when
// there is none to make (the base commit is already being measured).
func (s *Service) stepOf(ctx context.Context, cr store.CheckRun, job store.Job, l loaded, d judge.Decision) (step, bool, error) {
	var (
		st  step
		err error
	)
	switch d.Outcome {
	case judge.Publish:
		st, err = s.publishStep(ctx, cr, job, l.accepted, l.findings, d.Report, d.Env, d.Notes, d.Looks, d.Settings)
	case judge.Extend:
		st, err = extendStep(cr, job, l.card, d.More, d.Looks)
	case judge.Stands:
		st, err = s.standingStep(ctx, cr, job, l.accepted, l.findings, d.Key)
	case judge.MeasureBase:
		return s.measureBaseStep(cr, job, l.card)
	case judge.Broken:
		st, err = brokenStep(cr, d.RunnerFault, d.Reasons)
	default:
		err = fmt.Errorf("judge check run %d: unknown outcome %q", cr.ID, d.Outcome)
	}
	return st, err == nil, err
}

// promotionOf is the baseline a promotion stores with the step — a
// nightly matrix cell's first runs, or the base commit measured for a
// check — checked under the baseline rules against the history the load
// read, and the note that says how it went. nil: the rules refused it
// (the note says why).
func promotionOf(cr store.CheckRun, job store.Job, l loaded, p judge.Promotion) (*store.NewBaseline, string) {
	if p.Label != "" {
		// A new cell: the load found no baseline of its key.
		meta := baseline.Meta{Repo: cr.Repo, Key: p.Key, Version: "nightly-" + rev.Short(cr.HeadSHA), Commit: cr.HeadSHA, By: "perfgate", Reason: "first nightly of this matrix cell"}
		plan, err := baseline.Prepare(p.Runs, meta, l.in.Tier, nil)
		if err != nil {
			return nil, fmt.Sprintf("%s: first runs not stored as a baseline: %v", p.Label, err)
		}
		return &store.NewBaseline{Baseline: plan.Row, Audit: plan.Audit}, fmt.Sprintf("%s: first nightly, promoted as the cell's baseline", p.Label)
	}
	meta := baseline.Meta{Repo: job.Repo, Key: job.Tier, Version: "base-" + rev.Short(job.HeadSHA), Commit: job.HeadSHA, By: "perfgate",
		Reason: fmt.Sprintf("first baseline, measured for PR #%d", job.PRNumber)}
	plan, err := baseline.Prepare(p.Runs, meta, l.in.Tier, l.baseHistory)
	if err != nil {
		return nil, "the base commit's runs were compared but not stored as the baseline: " + err.Error()
	}
	return &store.NewBaseline{Baseline: plan.Row, Audit: plan.Audit},
		fmt.Sprintf("baseline: the base commit %s, measured for this PR and promoted as the first `%s` baseline", rev.Short(job.HeadSHA), job.Tier)
}
