package longrun

import (
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Soak is a soak run's verdict as the verdict document: one row per trend,
// its fitted line's values at the judged window's ends, its slope per hour
// as the change and its limit as the threshold; a failed trend is a
// regression row. A trend without a limit, or without enough samples, is
// shown as a secondary row and never decides.
func Soak(r soak.Report) (*gate.Report, error) {
	rows := make([]gate.MetricResult, 0, len(r.Trends))
	for _, t := range r.Trends {
		m := gate.MetricResult{Metric: t.Name, Key: t.Name, Unit: t.Unit, Direction: config.HigherIsWorse, Trend: gate.TrendAbsolute,
			Baseline: t.Start, Candidate: t.End, Estimate: t.PerHour, Delta: t.PerHour, Threshold: t.Limit,
			CandidateRuns: t.Samples, Rule: gate.RuleSoak}
		if t.Limit < 0 {
			m.Direction, m.Threshold = config.LowerIsWorse, -t.Limit
		}
		m.Decided = reason(t, m.Direction.Sign()*t.PerHour > m.Threshold)
		if soak.Relative(t.Name) {
			m.Trend = gate.TrendRelative
		}
		switch t.Status {
		case soak.Fail:
			m.Verdict = gate.MetricRegression
		case soak.Pass:
			m.Verdict = gate.MetricPass
		case soak.NotJudged:
			m.Verdict, m.Secondary = string(soak.NotJudged), true
		default:
			m.Verdict, m.Secondary, m.Rule, m.Note = string(t.Status), true, gate.RuleUnmeasured, t.Why
		}
		rows = append(rows, m)
	}
	d := time.Duration(r.DurationS * float64(time.Second)).Round(time.Second)
	return gate.LongRun(string(check.TierSoak), gate.DesignSoak, rows, 0, 1, []string{d.String() + " of steady load"})
}

// reason says what decided a trend's row in words only: its numbers are
// the row's (slope, limit, the line's ends), printed by the row's methods,
// so no number reads two ways. past reports whether the slope is past the
// limit.
func reason(t soak.Trend, past bool) string {
	switch {
	case t.Status == soak.Fail:
		return "Theil–Sen slope past its limit per hour"
	case t.Status == soak.Pass && past:
		return "slope past its limit per hour, but it moved less than the noise floor over the run"
	case t.Status == soak.Pass:
		return "Theil–Sen slope within its limit per hour"
	case t.Status == soak.NotJudged:
		return "no limit set"
	}
	return t.Why
}
