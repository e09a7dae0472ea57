package gate

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/perfgate/perfgate/internal/config"
)

// WriteText prints the report as a benchstat-like plain-text table: values
// with units, signed deltas, "~" where the change is not distinguishable
// from noise, then the test that decided (one-sided p after Holm, its
// interval, degrees of freedom), the evidence and the α it spent.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "tier %s: %s — %s\n", r.Tier, strings.ToUpper(string(r.Verdict)), r.Evidence())
	fmt.Fprintf(w, "%s\n\n", r.Policy())
	if len(r.Metrics) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tbaseline\tcandidate\tΔ (estimate tested)\tthreshold\tnoise\tverdict\ttest (one-sided p after Holm, interval; equivalence bound)")
		for _, m := range r.Metrics {
			name := m.Metric
			if m.Secondary {
				name += " (secondary)"
			}
			delta := "~"
			if m.Verdict != MetricSame {
				delta = signedChange(m)
			}
			detail := m.Note
			if detail == "" {
				p := fmt.Sprintf("p=%.2g", m.HolmP)
				if m.Secondary {
					p = fmt.Sprintf("p=%.2g (not in the family)", m.P)
				}
				detail = fmt.Sprintf("%s [%s, %s] df=%.0f; %s", p, signed(m, m.CILow), signed(m, m.CIHigh), m.DF, Equivalence(m))
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

// Evidence says what the verdict rests on: runs or pairs, sessions,
// history, and the α this look spent out of the pull request's budget.
func (r *Report) Evidence() string {
	var runs string
	switch r.Design {
	case DesignInterleaved:
		runs = fmt.Sprintf("%d interleaved %s", r.Pairs, plural(r.Pairs, "pair", "pairs"))
	case DesignRecent:
		runs = fmt.Sprintf("%d run(s) vs %d run(s) of the recent baselines", r.CandidateRuns, r.BaselineRuns)
	default:
		runs = fmt.Sprintf("%d baseline run(s) vs %d candidate run(s)", r.BaselineRuns, r.CandidateRuns)
	}
	if r.CandidateSessions > 1 {
		runs += fmt.Sprintf(" from %d sessions", r.CandidateSessions)
	}
	hist := "no noise history"
	if r.HistorySessions > 0 {
		hist = fmt.Sprintf("noise history of %d %s", r.HistorySessions, plural(r.HistorySessions, "session", "sessions"))
	}
	return fmt.Sprintf("%s, %s; look %d of %d: α %s of the pull request's %s (%s spent), confidence %s",
		runs, hist, r.Look(), r.Looks.Max, pctg(r.Alpha), pctg(1-r.Confidence), pctg(r.Looks.SpentAlpha()), pctg(r.Confidence))
}

// Policy says how the tier turns evidence into a verdict.
func (r *Report) Policy() string {
	at := "past its threshold (a change exactly at the threshold is caught half the time)"
	if r.RegressionAt == config.RegressionAtHalf {
		at = "past half its threshold"
	}
	inc := "an inconclusive result leaves the check neutral (inconclusive: neutral)"
	if r.InconclusivePolicy == config.InconclusiveNeedsAck {
		inc = "an inconclusive result holds the check until a maintainer acknowledges it or more runs decide (inconclusive: needs_ack)"
	}
	return fmt.Sprintf("policy: a significant change regresses %s; %s", at, inc)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pctg prints a small probability: 0.25%, 0.0625%.
func pctg(p float64) string {
	return strconv.FormatFloat(100*p, 'g', 3, 64) + "%"
}

// signed prints a change the metric's way: percent or points.
func signed(m MetricResult, x float64) string {
	if absolute(m) {
		return fmt.Sprintf("%+.2fpp", 100*x)
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
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
	case "ms/tok":
		return fmt.Sprintf("%.3f ms/tok", v)
	}
	if absolute(m) {
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return fmt.Sprintf("%.4g", v)
}

// signedChange is the change the test used: the geometric-mean ratio of
// runs, or of pairs, not the medians' (which are context).
func signedChange(m MetricResult) string {
	if m.Note != "" {
		return "-"
	}
	if absolute(m) {
		return fmt.Sprintf("%+.2fpp", 100*m.Estimate)
	}
	return fmt.Sprintf("%+.2f%%", 100*m.Estimate)
}

// Equivalence states the pass (TOST) test against the threshold the way a
// reader checks it: "no regression larger than 5% (upper bound +2.1%)".
func Equivalence(m MetricResult) string {
	if m.Note != "" {
		return ""
	}
	lim := strings.TrimPrefix(strings.TrimPrefix(threshold(m), "+"), "-")
	word := "larger"
	if m.Direction.Sign() < 0 {
		word = "drop larger"
	}
	bound := "upper bound"
	if m.Direction.Sign() < 0 {
		bound = "lower bound"
	}
	if m.Bound*m.Direction.Sign() < m.Threshold {
		if m.Direction.Sign() < 0 {
			return fmt.Sprintf("no %s than %s (%s %s)", word, lim, bound, signed(m, m.Bound))
		}
		return fmt.Sprintf("no regression %s than %s (%s %s)", word, lim, bound, signed(m, m.Bound))
	}
	return fmt.Sprintf("cannot rule out %s (%s %s)", lim, bound, signed(m, m.Bound))
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
