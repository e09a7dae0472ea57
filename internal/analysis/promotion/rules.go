package promotion

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Check applies the traceability rule to runs: Trace's problems, and — for
// runs that record everything — the gate's own comparability check on the
// set against itself, which lists the fields on which the runs disagree
// with each other and the runs GPU telemetry marked untrustworthy. An
// error is the gate's failure to compare, not a problem of the runs.
func Check(runs []*result.Result, commit string, tier config.Tier) (Provenance, []string, error) {
	prov, problems := Trace(runs, commit)
	if len(runs) == 0 || len(problems) > 0 {
		return prov, problems, nil
	}
	self, err := gate.Compare(runs, runs, tier, gate.Options{Looks: gate.SingleLook()})
	if err != nil {
		return Provenance{}, nil, fmt.Errorf("check runs: %w", err)
	}
	for _, m := range self.Mismatches {
		problems = append(problems, fmt.Sprintf("the runs disagree on %s (%s): one baseline is one environment", m.Field, m.Baseline))
	}
	for _, ex := range self.ExcludedRuns {
		problems = append(problems, "untrustworthy "+strings.TrimPrefix(ex, "baseline "))
	}
	if len(problems) > 0 {
		return Provenance{}, problems, nil
	}
	return prov, nil, nil
}

// Worse is a gated metric on which the new runs are worse than the current
// baseline.
type Worse struct {
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit,omitempty"`
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	Delta     float64 `json:"delta"` // as gate.MetricResult: fraction, or a difference for error_rate
	NoiseBand float64 `json:"noise_band"`
	Verdict   string  `json:"verdict"`
	Note      string  `json:"note,omitempty"`
}

func (w Worse) String() string {
	if w.Note != "" {
		return fmt.Sprintf("%s (%s)", w.Metric, w.Note)
	}
	if w.Unit == "" { // error_rate: absolute, in percentage points
		return fmt.Sprintf("%s %+.2fpp (%.2f%% → %.2f%%, noise ±%.2gpp)", w.Metric, 100*w.Delta, 100*w.Baseline, 100*w.Candidate, 100*w.NoiseBand)
	}
	return fmt.Sprintf("%s %+.2f%% (%.4g → %.4g %s, noise ±%.2g%%)", w.Metric, 100*w.Delta, w.Baseline, w.Candidate, w.Unit, 100*w.NoiseBand)
}

// WorseMetrics is the "only moves up" test. A gated metric blocks when the
// gate calls it a regression, or when its estimate moved in the worse
// direction by more than its noise band and the gate's one-sided test
// (Holm across the gated metrics, at the tier's confidence) says the shift
// is real — however far inside the PR threshold. The threshold is what one
// PR may cost; if baselines absorbed sub-threshold losses, promotions of
// 4% each would compound into a loss no PR gate ever flags. The reference
// is the median of recent baselines and the test carries the
// session-to-session noise their means show, so a re-run of unchanged
// code on another day is not refused for that day's shift (with 2%
// session shifts, comparing with the latest baseline alone refused 19% of
// them). A gated metric the gate could not measure also blocks: what
// cannot be compared cannot be shown not to be lower.
func WorseMetrics(rep *gate.Report) []Worse {
	var out []Worse
	for _, m := range rep.Metrics {
		if m.Secondary {
			continue
		}
		worse := m.Direction.Sign() * m.Estimate
		blocked := m.Verdict == gate.MetricRegression || m.Note != "" ||
			(worse > m.NoiseBand && m.HolmP <= rep.Alpha)
		if blocked {
			out = append(out, Worse{Metric: m.Metric, Unit: m.Unit, Baseline: m.Baseline, Candidate: m.Candidate,
				Delta: m.Delta, NoiseBand: m.NoiseBand, Verdict: m.Verdict, Note: m.Note})
		}
	}
	return out
}
