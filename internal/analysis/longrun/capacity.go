package longrun

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/figure"
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
		Rule: gate.RuleCapacity, Decided: reasonOf(c), BaselineRange: rangeOf(c.Base), CandidateRange: rangeOf(c.Head)}
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
		m.Rule, m.Note, m.Decided = gate.RuleCannotTell, c.Why, ""
		m.Baseline, m.Candidate, m.Estimate, m.Delta, m.BaselineRange, m.CandidateRange = 0, 0, 0, 0, nil, nil
	case c.Base.Median == 0 && c.Verdict != capacity.Recorded && c.Verdict != capacity.Same:
		// Base sustained none of the rates: there is no ratio to print.
		m.Note = "base sustained none of the rates swept"
	}
	return gate.LongRun(string(check.TierCapacity), gate.DesignCapacity, []gate.MetricResult{m}, c.Base.N, c.Head.N, nil)
}

// reasonOf says what decided in words, its rates printed as the row's
// values are (figure.Value); the knees and the change are the row's.
func reasonOf(c capacity.Comparison) string {
	switch {
	case c.Verdict == capacity.Regression:
		return fmt.Sprintf("head failed at %s, which base sustained", figure.Value(c.Head.High, capacity.Unit))
	case c.Verdict == capacity.Improvement:
		return fmt.Sprintf("head sustained %s, where base failed", figure.Value(c.Head.Low, capacity.Unit))
	case c.Verdict == capacity.Recorded:
		return "no base was swept, so nothing is compared"
	case c.Verdict == capacity.Same && c.Base.Median == 0 && c.Head.Median == 0:
		return "neither sustains the lowest rate swept"
	case c.Verdict == capacity.Same:
		return "a change smaller than the threshold either way"
	}
	return "the knees' ranges overlap: sweep again or narrow the resolution"
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
