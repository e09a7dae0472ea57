package judge

import (
	"fmt"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// judgeMatrix judges each cell of a nightly matrix against that cell's own
// baseline (key "<tier>/<cell>") and reports all cells on one check run:
// the worst cell's verdict is the check's. A cell with no baseline yet has
// its runs promoted as the first one (the nightly measures the default
// branch, which is what a baseline is).
func judgeMatrix(in Input) Decision {
	tier := in.Tier
	cells := append([]Cell{}, in.Cells...)
	sort.SliceStable(cells, func(a, b int) bool { return cells[a].Label < cells[b].Label })
	merged := &gate.Report{Tier: in.Key, Verdict: gate.Pass, RegressionAt: tier.RegressionAt, InconclusivePolicy: tier.Inconclusive}
	d := Decision{Looks: map[string]gate.Looks{}}
	var notes []string
	var all Evidence
	var env *result.Environment
	for _, c := range cells {
		cand := c.Runs.Runs
		all.Failures = append(all.Failures, c.Runs.Failures...)
		all.Bad = append(all.Bad, c.Runs.Bad...)
		for _, b := range c.Runs.Bad {
			notes = append(notes, c.Label+": "+b)
		}
		if len(cand) == 0 {
			merged.Verdict = Worse(merged.Verdict, gate.Inconclusive)
			notes = append(notes, fmt.Sprintf("%s: no runs measured", c.Label))
			continue
		}
		if env == nil {
			env = envOf(cand)
		}
		key := CellKey(in.Key, c.Label)
		d.Trends = append(d.Trends, Trend{Key: key, Job: c.Job, Runs: cand})
		if c.Base == nil {
			d.Promotions = append(d.Promotions, Promotion{Key: key, Label: c.Label, Runs: cand, At: len(notes)})
			notes = append(notes, fmt.Sprintf("%s: first nightly, to be promoted as the cell's baseline", c.Label))
			continue
		}
		opt := gate.Options{History: c.History, Looks: c.Looks, CandidateSessions: c.Runs.Sessions}
		rep, err := gate.Compare(c.Base.Runs, cand, tier, opt)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: compare: %v", c.Label, err))
			merged.Verdict = Worse(merged.Verdict, gate.Inconclusive)
			continue
		}
		d.Looks[key] = rep.Looks
		merge(merged, rep, c.Label)
		for _, n := range rep.Notes {
			notes = append(notes, c.Label+": "+n)
		}
	}
	if len(merged.Metrics) == 0 && len(all.Failures)+len(all.Bad) > 0 {
		f := fail(in.Job, all)
		f.Trends, f.Promotions = d.Trends, unplaced(d.Promotions)
		return f
	}
	d.Outcome, d.Report, d.Env, d.Notes = Publish, merged, env, notes
	return d
}

// merge adds a cell's report to the matrix's: its verdict if worse, its
// metrics, mismatches and excluded runs named by the cell.
func merge(merged, rep *gate.Report, label string) {
	merged.Verdict = Worse(merged.Verdict, rep.Verdict)
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
	merged.ExcludedRuns = append(merged.ExcludedRuns, rep.ExcludedRuns...)
}

// Worse orders verdicts regression > inconclusive > pass.
func Worse(a, b gate.Verdict) gate.Verdict {
	rank := map[gate.Verdict]int{gate.Pass: 0, gate.Inconclusive: 1, gate.Regression: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
