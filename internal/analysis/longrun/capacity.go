package longrun

import (
	"math"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Capacity is the comparison as the verdict document every surface prints
// (gate.Report): one gated row, the sustainable rate, base's median knee
// and head's, the change between them, the threshold (lower is worse) and
// where each side's knee lies; the verdict, rule and headline follow from
// it. A comparison the host distorted is a row that cannot tell, with the
// reason, and the verdict is inconclusive — never an improvement.
func Capacity(c capacity.Comparison) (*gate.Report, error) {
	m := gate.MetricResult{Metric: config.SustainableRate, Key: config.SustainableRate, Unit: capacity.Unit, Direction: config.LowerIsWorse,
		Threshold: c.Threshold, Baseline: c.Base.Median, Candidate: c.Head.Median, BaselineRuns: c.Base.N, CandidateRuns: c.Head.N,
		Rule: gate.RuleCapacity, Decided: c.Reason, BaselineRange: rangeOf(c.Base), CandidateRange: rangeOf(c.Head)}
	if !math.IsInf(c.Change, 0) && !math.IsNaN(c.Change) {
		m.Estimate, m.Delta = c.Change, c.Change
	}
	switch c.Verdict {
	case capacity.Regression:
		m.Verdict = gate.MetricRegression
	case capacity.Improvement:
		m.Verdict = gate.MetricImprovement
	case capacity.Same:
		m.Verdict = gate.MetricPass
	case capacity.Recorded:
		m.Verdict, m.Rule = gate.MetricPass, gate.RuleRecorded
		m.Baseline, m.BaselineRange = 0, nil
	default:
		m.Verdict = gate.MetricInconclusive
	}
	switch {
	case c.CannotTell:
		m.Rule, m.Note, m.Decided = gate.RuleCannotTell, c.Reason, ""
		m.Baseline, m.Candidate, m.Estimate, m.Delta, m.BaselineRange, m.CandidateRange = 0, 0, 0, 0, nil, nil
	case c.Base.Median == 0 && c.Verdict != capacity.Recorded && c.Verdict != capacity.Same:
		// Base sustained none of the rates: there is no ratio to print.
		m.Note = "base sustained none of the rates swept"
	}
	return gate.LongRun(string(check.TierCapacity), gate.DesignCapacity, []gate.MetricResult{m}, c.Base.N, c.Head.N, nil)
}

// rangeOf is where a side's knee lies, nil without sweeps.
func rangeOf(s capacity.Side) *gate.Range {
	if s.N == 0 {
		return nil
	}
	r := &gate.Range{Low: s.Low}
	if !math.IsInf(s.High, 0) {
		r.High = s.High
	}
	if math.IsInf(r.Low, 0) {
		r.Low = 0
	}
	return r
}
