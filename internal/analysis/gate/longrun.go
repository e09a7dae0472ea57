package gate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// A long run — a capacity sweep to the knee, a soak — is judged by its own
// rule (the knees' ranges, a trend's slope), not by the tests above, and
// told in the same verdict document, so its check run, comment, check page
// and dashboard row print it through the same methods as the gate's.

// What decided a long run's row, and its report.
const (
	RuleCapacity   = "capacity_knee" // the sustainable rate: past its threshold with the knees' ranges apart, or within it
	RuleSoak       = "soak_trend"    // a trend's slope per hour against its limit
	RuleCannotTell = "cannot_tell"   // the host distorted the measurement, or a side has none: no verdict
	RuleRecorded   = "recorded"      // one side only (the nightly's sweep of the branch head): recorded, nothing compared
)

// Designs of a long run's report.
const (
	DesignCapacity = "capacity" // sweeps of base and head to their knees
	DesignSoak     = "soak"     // one steady-load run of the head, its trends fitted
)

// Trends: how a soak row's changes read, per hour.
const (
	TrendAbsolute = "absolute" // in the row's unit per hour: "+80.1 MB/h"
	TrendRelative = "relative" // a fraction of where the line starts, per hour: "+12.0%/h"
)

// Range is where a capacity knee lies: the lowest rate any sweep sustained
// and the highest any sweep did not (0: every sweep sustained its top rate).
type Range struct {
	Low  float64 `json:"low"`
	High float64 `json:"high,omitempty"`
}

// text prints the range in unit: "16.00–20.00 req/s", "≥ 8.00 req/s".
func (r Range) text(unit string) string {
	if r.High == 0 {
		return "≥ " + figure.Value(r.Low, unit)
	}
	return figure.Value(r.Low, "") + "–" + figure.Value(r.High, unit)
}

// LongRun makes a long run's verdict document from its rows, which the
// capacity or soak judge filled: the verdict folds the gated rows (a
// regression row regresses, a row that cannot tell or is open leaves it
// inconclusive), and the rule and headline follow from them. It computes
// nothing statistical.
func LongRun(tier, design string, rows []MetricResult, baseRuns, candRuns int, notes []string) (*Report, error) {
	rep := &Report{Tier: tier, Design: design, Metrics: rows, BaselineRuns: baseRuns, CandidateRuns: candRuns, Notes: notes,
		Rule: RuleCapacity, Verdict: Pass}
	if design == DesignSoak {
		rep.Rule = RuleSoak
	}
	gated := 0
	for _, m := range rows {
		if m.Secondary {
			continue
		}
		gated++
		switch {
		case m.Rule == RuleCannotTell:
			rep.Verdict, rep.Rule = Inconclusive, RuleCannotTell
		case m.Verdict == MetricRegression && rep.Rule != RuleCannotTell:
			rep.Verdict = Regression
		case m.Verdict == MetricInconclusive && rep.Verdict == Pass:
			rep.Verdict = Inconclusive
		case m.Rule == RuleRecorded && rep.Verdict == Pass:
			rep.Rule = RuleRecorded
		}
	}
	if gated == 0 {
		// Every row was left unjudged (too few samples, no limits): the
		// run cannot tell, and says why.
		rep.Verdict, rep.Rule = Inconclusive, RuleCannotTell
	}
	rep.Headline = longRunHeadline(rep)
	if err := rep.checkFinite(); err != nil {
		return nil, fmt.Errorf("%s verdict: %w", tier, err)
	}
	return rep, nil
}

// longRunHeadline words a long run's verdict from its gated rows.
func longRunHeadline(rep *Report) string {
	var rows []MetricResult
	for _, m := range rep.Metrics {
		if !m.Secondary {
			rows = append(rows, m)
		}
	}
	if rep.Rule == RuleCannotTell {
		var why []string
		for _, m := range rows {
			if m.Rule == RuleCannotTell {
				why = append(why, m.Note)
			}
		}
		if len(rows) == 0 {
			for _, m := range rep.Metrics {
				why = append(why, m.Name()+": "+m.RuleText())
			}
			return "Inconclusive: cannot tell, no row could be judged (" + strings.Join(why, "; ") + ")."
		}
		return "Inconclusive: " + strings.Join(why, "; ") + "."
	}
	if rep.Design == DesignSoak {
		if rep.Verdict == Regression {
			var parts []string
			for _, m := range rows {
				if m.Verdict == MetricRegression {
					parts = append(parts, fmt.Sprintf("%s %s (threshold %s)", m.Name(), m.DeltaText(), m.ThresholdText()))
				}
			}
			return "Regression: " + strings.Join(parts, "; ") + "."
		}
		return fmt.Sprintf("No regression: every judged trend (%d) is within its limit.", len(rows))
	}
	var parts []string
	for _, m := range rows {
		if m.Rule == RuleRecorded {
			parts = append(parts, fmt.Sprintf("%s %s; %s", m.Name(), m.ValueText(m.Candidate), m.Decided))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s (%s, threshold %s): %s", m.Name(), m.ValueText(m.Baseline), m.ValueText(m.Candidate),
			m.DeltaText(), m.ThresholdText(), m.Decided))
	}
	word := map[Verdict]string{Regression: "Regression", Inconclusive: "Inconclusive", Pass: "No regression"}[rep.Verdict]
	if rep.Rule == RuleRecorded {
		word = "Recorded"
	}
	for _, m := range rows {
		if m.Verdict == MetricImprovement {
			word = "Improved"
		}
	}
	return word + ": " + strings.Join(parts, "; ") + "."
}

// longRun reports whether the row is a long run's (a capacity knee, a soak
// trend), whose interval, noise band and detectable change are not the
// tests'.
func (m MetricResult) longRun() bool {
	return m.Trend != "" || m.CandidateRange != nil
}

// perHourLimit prints a soak row's limit per hour, signed the way the
// trend is bad: "+64 MB/h", "+10%/h", "−0.05/h".
func (m MetricResult) perHourLimit() string {
	sign := "+"
	if m.Direction.Sign() < 0 {
		sign = figure.Minus
	}
	if m.Trend == TrendRelative {
		return sign + strconv.FormatFloat(100*m.Threshold, 'f', -1, 64) + "%/h"
	}
	s := sign + strconv.FormatFloat(m.Threshold, 'f', -1, 64)
	if m.Unit != "" {
		s += " " + m.Unit
	}
	return s + "/h"
}

// perHour prints a soak row's change per hour.
func (m MetricResult) perHour(x float64) string {
	if m.Trend == TrendRelative {
		return figure.Change(x) + "/h"
	}
	s := figure.Value(x, "")
	if x > 0 {
		s = "+" + s
	}
	if m.Unit != "" {
		s += " " + m.Unit
	}
	return s + "/h"
}
