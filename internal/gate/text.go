package gate

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText prints the report as a benchstat-like plain-text table: values
// with units, signed deltas, "~" where the change is not distinguishable
// from noise, then the p-value and run counts.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "tier %s: %s — %d baseline run(s) vs %d candidate run(s), confidence %.1f%%\n\n",
		r.Tier, strings.ToUpper(string(r.Verdict)), r.BaselineRuns, r.CandidateRuns, 100*r.Confidence)
	if len(r.Metrics) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tbaseline\tcandidate\tΔ\tthreshold\tnoise\tverdict\ttest")
		for _, m := range r.Metrics {
			name := m.Metric
			if m.Secondary {
				name += " (secondary)"
			}
			delta := "~"
			if m.Verdict != MetricSame {
				delta = signedChange(m)
			}
			detail := ""
			if m.Note != "" {
				detail = m.Note
			} else {
				detail = fmt.Sprintf("p=%.3f n=%d+%d", m.PValue, m.BaselineRuns, m.CandidateRuns)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, value(m, m.Baseline), value(m, m.Candidate),
				delta, threshold(m), band(m), m.Verdict, detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Mismatches) > 0 {
		fmt.Fprintf(w, "\nenvironment mismatch:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  field\tbaseline\tcandidate")
		for _, m := range r.Mismatches {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Field, m.Baseline, m.Candidate)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, e := range r.ExcludedRuns {
		fmt.Fprintf(w, "excluded: %s\n", e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func absolute(m MetricResult) bool { return m.Key == "error_rate" }

func value(m MetricResult, v float64) string {
	if m.Verdict == MetricInconclusive && m.Note != "" && v == 0 {
		return "-"
	}
	switch m.Unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "tok/s", "req/s":
		return fmt.Sprintf("%.4g %s", v, m.Unit)
	case "MiB", "W":
		return fmt.Sprintf("%.0f %s", v, m.Unit)
	}
	if absolute(m) {
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return fmt.Sprintf("%.4g", v)
}

func signedChange(m MetricResult) string {
	if m.Note != "" {
		return "-"
	}
	if absolute(m) {
		return fmt.Sprintf("%+.2fpp", 100*m.Delta)
	}
	return fmt.Sprintf("%+.2f%%", 100*m.Delta)
}

func threshold(m MetricResult) string {
	s := m.Direction.Sign() * m.Threshold
	if absolute(m) {
		return fmt.Sprintf("%+.2gpp", 100*s)
	}
	return fmt.Sprintf("%+.3g%%", 100*s)
}

func band(m MetricResult) string {
	if m.Note != "" || math.IsNaN(m.NoiseBand) {
		return "-"
	}
	if absolute(m) {
		return fmt.Sprintf("±%.2gpp", 100*m.NoiseBand)
	}
	return fmt.Sprintf("±%.2g%%", 100*m.NoiseBand)
}
