package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// matrixPlans expands a tier's matrix into one plan per cell, each
// labelled; a tier without a matrix is its one plan with no label.
func matrixPlans(plan agentapi.Plan, t config.Tier) ([]agentapi.Plan, []string) {
	if len(t.Matrix) == 0 {
		return []agentapi.Plan{plan}, []string{""}
	}
	plans := make([]agentapi.Plan, 0, len(t.Matrix))
	labels := make([]string, 0, len(t.Matrix))
	for _, m := range t.Matrix {
		p := plan
		var parts []string
		if m.MaxConcurrency != 0 {
			p.Workload.MaxConcurrency = m.MaxConcurrency
			parts = append(parts, "c="+strconv.Itoa(m.MaxConcurrency))
		}
		if m.RequestRate != 0 {
			p.Workload.RequestRate = m.RequestRate
			parts = append(parts, "rate="+m.RequestRate.String())
		}
		if m.InputLen != 0 {
			p.Workload.InputLen = m.InputLen
			parts = append(parts, "in="+strconv.Itoa(m.InputLen))
		}
		if m.OutputLen != 0 {
			p.Workload.OutputLen = m.OutputLen
			parts = append(parts, "out="+strconv.Itoa(m.OutputLen))
		}
		if len(parts) == 0 {
			parts = []string{"base"}
		}
		plans = append(plans, p)
		labels = append(labels, strings.Join(parts, ","))
	}
	return plans, labels
}

// isMatrix reports whether the jobs measure labelled matrix cells, which
// are judged and promoted per cell (even a matrix of one).
func isMatrix(cells map[string][]int64) bool {
	if len(cells) > 1 {
		return true
	}
	for label := range cells {
		return label != ""
	}
	return false
}

// cellKey is the baseline and trend key of a matrix cell: the tier, or
// "<tier>/<cell>".
func cellKey(tier, cell string) string {
	if cell == "" {
		return tier
	}
	return tier + "/" + cell
}

// cellsOf groups job IDs by matrix cell.
func (s *Service) cellsOf(ctx context.Context, ids []int64) (map[string][]int64, error) {
	cells := map[string][]int64{}
	for _, id := range ids {
		j, err := s.judging().GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		snap, err := snapshotOf(j)
		if err != nil {
			return nil, err
		}
		cells[snap.Cell] = append(cells[snap.Cell], id)
	}
	return cells, nil
}

// judgeMatrix judges each cell of a nightly matrix against that cell's own
// baseline (key "<tier>/<cell>") and reports all cells on one check run:
// the worst cell's verdict is the check's. A cell with no baseline yet has
// its runs promoted as the first one (the nightly measures the default
// branch, which is what a baseline is).
func (s *Service) judgeMatrix(ctx context.Context, cr store.CheckRun, job store.Job, cells map[string][]int64) error {
	tier, err := tierOf(job)
	if err != nil {
		return err
	}
	labels := make([]string, 0, len(cells))
	for l := range cells {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	merged := &gate.Report{Tier: cr.Tier, Verdict: gate.Pass, RegressionAt: tier.RegressionAt, InconclusivePolicy: tier.Inconclusive}
	looks := map[string]gate.Looks{}
	var notes []string
	var all evidence
	var env *result.Environment
	for _, label := range labels {
		ev, err := s.runsOf(ctx, cells[label])
		if err != nil {
			return err
		}
		cand := ev.runs
		all.failures = append(all.failures, ev.failures...)
		all.bad = append(all.bad, ev.bad...)
		for _, b := range ev.bad {
			notes = append(notes, label+": "+b)
		}
		if len(cand) == 0 {
			merged.Verdict = worse(merged.Verdict, gate.Inconclusive)
			notes = append(notes, fmt.Sprintf("%s: no runs measured", label))
			continue
		}
		if env == nil {
			env = envOf(cand)
		}
		key := cellKey(cr.Tier, label)
		s.recordTrend(ctx, cr, key, cells[label][0], cand, tier)
		snap, err := baseline.Latest(ctx, s.judging(), cr.Repo, key)
		if errors.Is(err, store.ErrNotFound) {
			meta := baseline.Meta{Repo: cr.Repo, Key: key, Version: "nightly-" + rev.Short(cr.HeadSHA), Commit: cr.HeadSHA, By: "perfgate", Reason: "first nightly of this matrix cell"}
			if _, _, perr := baseline.Promote(ctx, s.judging(), cand, meta, tier); perr != nil {
				notes = append(notes, fmt.Sprintf("%s: first runs not stored as a baseline: %v", label, perr))
			} else {
				notes = append(notes, fmt.Sprintf("%s: first nightly, promoted as the cell's baseline", label))
			}
			continue
		}
		if err != nil {
			return err
		}
		opt, err := s.options(ctx, cr, key, snap.Version, ev.sessions)
		if err != nil {
			return err
		}
		rep, err := gate.Compare(snap.Runs, cand, tier, opt)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: compare: %v", label, err))
			merged.Verdict = worse(merged.Verdict, gate.Inconclusive)
			continue
		}
		looks[key] = rep.Looks
		merged.Verdict = worse(merged.Verdict, rep.Verdict)
		merged.Confidence, merged.Alpha, merged.Looks = rep.Confidence, rep.Alpha, rep.Looks
		if merged.CandidateRuns == 0 || rep.CandidateRuns < merged.CandidateRuns {
			merged.CandidateRuns, merged.BaselineRuns = rep.CandidateRuns, rep.BaselineRuns
		}
		for _, m := range rep.Metrics {
			m.Metric = label + " " + m.Metric
			merged.Metrics = append(merged.Metrics, m)
		}
		for _, mm := range rep.Mismatches {
			mm.Field = label + ": " + mm.Field
			merged.Mismatches = append(merged.Mismatches, mm)
		}
		for _, n := range rep.Notes {
			notes = append(notes, label+": "+n)
		}
		merged.ExcludedRuns = append(merged.ExcludedRuns, rep.ExcludedRuns...)
	}
	if len(merged.Metrics) == 0 && len(all.failures)+len(all.bad) > 0 {
		return s.fail(ctx, cr, job, all)
	}
	return s.publish(ctx, cr, job, merged, env, notes, looks, nil)
}

// worse orders verdicts regression > inconclusive > pass.
func worse(a, b gate.Verdict) gate.Verdict {
	rank := map[gate.Verdict]int{gate.Pass: 0, gate.Inconclusive: 1, gate.Regression: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
