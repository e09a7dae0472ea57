package gate

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// The methods below are how every surface prints a row of the verdict
// document: the check run, the PR comment, the check page and `perfgate
// compare` call them and print nothing of their own, so a number reads the
// same everywhere.

// Name is the metric as a reader knows it: "TPOT median", "c=16 · TPOT p99".
func (m MetricResult) Name() string { return DisplayName(m.Metric) }

// Points reports whether the metric is a rate compared as a difference in
// percentage points (error_rate) rather than as a ratio.
func (m MetricResult) Points() bool {
	if m.Key == "error_rate" {
		return true
	}
	_, name := splitCell(m.Metric)
	cm, ok := config.LookupMetric(name)
	return ok && cm.Absolute
}

// Measured reports whether the row has numbers (false: Note says why not).
func (m MetricResult) Measured() bool { return m.Note == "" }

// ValueText prints one of the row's values (Baseline, Candidate, a median)
// in the metric's unit; a recorded row (one side only) has no baseline.
func (m MetricResult) ValueText(v float64) string {
	if !m.Measured() || m.Rule == RuleRecorded && v == 0 {
		return "—"
	}
	if m.Points() {
		return figure.Value(100*v, "%")
	}
	return figure.Value(v, m.Unit)
}

// ChangeText prints a change by value (a fraction, or points).
func (m MetricResult) ChangeText(x float64) string {
	if m.Trend != "" {
		return m.perHour(x)
	}
	if m.Points() {
		return figure.Points(x)
	}
	return figure.Change(x)
}

// DeltaText is the row's change: the estimate the test used.
func (m MetricResult) DeltaText() string {
	if !m.Measured() || m.Rule == RuleRecorded {
		return "—"
	}
	return m.ChangeText(m.Estimate)
}

// ThresholdText is the limit signed the way the metric gets worse.
func (m MetricResult) ThresholdText() string {
	if m.Trend != "" {
		if m.Threshold == 0 {
			return "none"
		}
		return m.perHourLimit()
	}
	return figure.Threshold(m.Threshold, m.Direction.Sign() > 0, m.Points())
}

// BandText is the noise band; a long run's row has none ("—"): its
// rule reads the knees' ranges or a trend's slope.
func (m MetricResult) BandText() string {
	if !m.Measured() || m.longRun() {
		return "—"
	}
	return figure.Band(m.NoiseBand, m.Points())
}

// IntervalText is the interval of the rule that decided, with its level:
// "[+2.1%, +9.8%] at 99.7%"; for a capacity row, where the knees lie:
// "knees 16.00–20.00 → 6.00–8.00 req/s".
func (m MetricResult) IntervalText() string {
	if !m.Measured() || m.Trend != "" {
		return "—"
	}
	if m.CandidateRange != nil {
		if m.BaselineRange == nil {
			return "knee " + m.CandidateRange.text(m.Unit)
		}
		return "knees " + m.BaselineRange.text(m.Unit) + " → " + m.CandidateRange.text(m.Unit)
	}
	return fmt.Sprintf("[%s, %s] at %s", m.ChangeText(m.CILow), m.ChangeText(m.CIHigh), figure.Level(m.Level))
}

// DetectableText is the smallest worse change the evidence could call.
func (m MetricResult) DetectableText() string {
	if !m.Measured() || m.longRun() {
		return "—"
	}
	return m.ChangeText(m.Detectable)
}

// VerdictText is the row's verdict in words.
func (m MetricResult) VerdictText() string {
	switch m.Verdict {
	case MetricSame:
		return "~ no change"
	case MetricPass:
		return "pass"
	}
	return m.Verdict
}

// RuleText says what decided the row, with the test's own numbers.
func (m MetricResult) RuleText() string {
	switch m.Rule {
	case RuleRegressionTest:
		return fmt.Sprintf("regression test: %s after Holm, at least %s at %s", figure.PIs(m.HolmP), m.ChangeText(m.betterEnd()), figure.Level(m.Level))
	case RuleImprovementTest:
		return fmt.Sprintf("improvement beyond the noise band, at most %s at %s", m.ChangeText(m.worseEnd()), figure.Level(m.Level))
	case RuleEquivalence:
		return m.Equivalence()
	case RuleLastLook:
		return fmt.Sprintf("last look of the plan: the estimate %s is below the regression line %s; %s", m.DeltaText(), m.ChangeText(m.Call), m.Equivalence())
	case RuleOpen:
		return fmt.Sprintf("not decided: %s could be anywhere in %s", m.DeltaText(), m.IntervalText())
	case RuleCapacity, RuleSoak, RuleRecorded:
		return m.Decided
	case RuleUnmeasured:
		return m.Note
	}
	return m.Note
}

// Equivalence states the pass (TOST) test against the threshold the way a
// reader checks it: "no regression larger than 5% (upper bound +2.1% at
// 96.4%, p=0.003)".
func (m MetricResult) Equivalence() string {
	if !m.Measured() || m.longRun() {
		return ""
	}
	lim := strings.TrimLeft(m.ThresholdText(), "+"+figure.Minus)
	word, bound := "regression larger", "upper bound"
	if m.Direction.Sign() < 0 {
		word, bound = "drop larger", "lower bound"
	}
	level := figure.Level(1 - m.Beta)
	if m.Bound*m.Direction.Sign() < m.Threshold {
		return fmt.Sprintf("no %s than %s (%s %s at %s, %s)", word, lim, bound, m.ChangeText(m.Bound), level, figure.PIs(m.PassP))
	}
	return fmt.Sprintf("cannot rule out %s (%s %s at %s)", lim, bound, m.ChangeText(m.Bound), level)
}

// worseEnd and betterEnd are the interval's ends on the worse and the
// better side of the estimate.
func (m MetricResult) worseEnd() float64 {
	if m.Direction.Sign() < 0 {
		return m.CILow
	}
	return m.CIHigh
}

func (m MetricResult) betterEnd() float64 {
	if m.Direction.Sign() < 0 {
		return m.CIHigh
	}
	return m.CILow
}

// DisplayName turns "tpot_p99" into "TPOT p99", "output_throughput" into
// "output throughput" and a matrix cell's "c=16 tpot_p99" into
// "c=16 · TPOT p99".
func DisplayName(metric string) string {
	if cell, name := splitCell(metric); cell != "" {
		return cell + " · " + DisplayName(name)
	}
	series, stat, ok := strings.Cut(metric, "_")
	switch series {
	case "ttft", "tpot", "itl", "e2el":
		if ok {
			return strings.ToUpper(series) + " " + stat
		}
	case "gpu":
		return "GPU " + strings.ReplaceAll(stat, "_", " ")
	}
	return strings.ReplaceAll(metric, "_", " ")
}

// splitCell separates a nightly matrix cell's label ("c=16 tpot_p99") from
// the metric name.
func splitCell(metric string) (cell, name string) {
	if i := strings.LastIndexByte(metric, ' '); i >= 0 {
		return metric[:i], metric[i+1:]
	}
	return "", metric
}

// headline words the verdict from the rows, so no surface can print a
// headline its table contradicts: a pass names a last-look row and the
// bound it could not rule out; a regression names its rows; an
// inconclusive verdict says which of its causes holds.
func headline(rep *Report) string {
	gated := func(rule string) []MetricResult {
		var out []MetricResult
		for _, m := range rep.Metrics {
			if !m.Secondary && m.Rule == rule {
				out = append(out, m)
			}
		}
		return out
	}
	switch rep.Verdict {
	case Regression:
		var parts []string
		for _, m := range gated(RuleRegressionTest) {
			parts = append(parts, fmt.Sprintf("%s %s (threshold %s)", m.Name(), m.DeltaText(), m.ThresholdText()))
		}
		return "Regression: " + strings.Join(parts, "; ") + "."
	case Pass:
		s := "No regression: every gated metric is shown to be within its threshold."
		if last := gated(RuleLastLook); len(last) > 0 {
			var parts []string
			for _, m := range last {
				parts = append(parts, fmt.Sprintf("%s's estimate %s is below its regression line %s; a change of %s is not ruled out (bound %s at %s)",
					m.Name(), m.DeltaText(), m.ChangeText(m.Call), m.ThresholdText(), m.ChangeText(m.Bound), figure.Level(1-m.Beta)))
			}
			s = "Passed at the last look of the plan: " + strings.Join(parts, "; ") + "."
		}
		if imp := gated(RuleImprovementTest); len(imp) > 0 {
			var names []string
			for _, m := range imp {
				names = append(names, fmt.Sprintf("%s %s", m.Name(), m.DeltaText()))
			}
			s += " Improved: " + strings.Join(names, ", ") + "."
		}
		return s
	}
	switch rep.Rule {
	case RuleEnvironment:
		return fmt.Sprintf("Inconclusive: the runs differ from the baseline's in %d environment field(s), so they are not compared.", len(rep.Mismatches))
	case RuleTooFewRuns:
		return fmt.Sprintf("Inconclusive: too few valid runs (%d baseline, %d candidate; at least %d needed on each side).", rep.BaselineRuns, rep.CandidateRuns, MinRuns)
	case RuleUnmeasured:
		var names []string
		for _, m := range gated(RuleUnmeasured) {
			names = append(names, m.Name())
		}
		return "Inconclusive: " + strings.Join(names, ", ") + " could not be measured in every run; more runs will not help."
	}
	var parts []string
	for _, m := range gated(RuleOpen) {
		parts = append(parts, fmt.Sprintf("%s %s could be anywhere in %s", m.Name(), m.DeltaText(), m.IntervalText()))
	}
	s := "Inconclusive: " + strings.Join(parts, "; ") + "."
	unit := "runs"
	if rep.Design == DesignInterleaved {
		unit = "pairs"
	}
	if need := rep.RunsToResolve(); need > 0 {
		s += fmt.Sprintf(" At this noise about %d %s in all would resolve a change the size of the threshold.", need, unit)
	}
	if rep.NeedMoreRuns > rep.CandidateRuns {
		return s + fmt.Sprintf(" %d more %s come next (judged again with all %d).", rep.NeedMoreRuns-rep.CandidateRuns, unit, rep.NeedMoreRuns)
	}
	return s + " The change is too close to its threshold for this noise; a maintainer decides."
}
