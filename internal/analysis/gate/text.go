package gate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// WriteText prints the verdict document as a benchstat-like plain-text
// table: the headline first, then per metric the values, the change the
// test used ("~" where the interval holds no change), the interval at the
// level of the rule that decided, the threshold, the noise band, the
// smallest change the evidence could call, the verdict and the rule; then
// the evidence and the α it spent. It prints what the document holds and
// computes nothing (the check run and the pages print the same methods).
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "tier %s: %s\n%s\n", r.Tier, strings.ToUpper(string(r.Verdict)), r.Headline)
	if len(r.Metrics) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tbaseline\tcandidate\tΔ\tinterval\tthreshold\tnoise\tdetectable\tverdict\trule")
		for _, m := range r.Metrics {
			name := m.Name()
			if m.Secondary {
				name += " (secondary)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, m.ValueText(m.Baseline), m.ValueText(m.Candidate),
				m.DeltaText(), m.IntervalText(), m.ThresholdText(), m.BandText(), m.DetectableText(), m.VerdictText(), m.RuleText())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n%s\n%s\n", r.Evidence(), r.Policy())
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
// It is maintainers' detail, not the author's first screen.
func (r *Report) Evidence() string {
	switch r.Design {
	case DesignCapacity:
		if r.BaselineRuns == 0 {
			return fmt.Sprintf("%d %s of the head to its knee", r.CandidateRuns, figure.Plural(r.CandidateRuns, "sweep", "sweeps"))
		}
		return fmt.Sprintf("%d %s of the base and %d of the head to their knees", r.BaselineRuns, figure.Plural(r.BaselineRuns, "sweep", "sweeps"), r.CandidateRuns)
	case DesignSoak:
		return "one steady-load run of the head; each trend fitted by Theil–Sen after the warm-up"
	}
	var runs string
	switch r.Design {
	case DesignInterleaved:
		runs = fmt.Sprintf("%d interleaved %s", r.Pairs, figure.Plural(r.Pairs, "pair", "pairs"))
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
		hist = fmt.Sprintf("noise history of %d %s", r.HistorySessions, figure.Plural(r.HistorySessions, "session", "sessions"))
	}
	plan := ""
	if n := r.Looks.Rounds(); n > 1 {
		plan = fmt.Sprintf("plan %d (a retest after plan %d's last look; this pull request's false-alarm bound is now %s), ", n, n-1, figure.Level(float64(n)*(1-r.Confidence)))
	}
	return fmt.Sprintf("%s, %s; %slook %d of %d: α %s of the plan's %s (%s spent; family-wise confidence %s over the plan's looks)",
		runs, hist, plan, r.Look(), r.Looks.Max, figure.Level(r.Alpha), figure.Level(1-r.Confidence), figure.Level(r.Looks.SpentAlpha()), figure.Level(r.Confidence))
}

// Policy says how the tier turns evidence into a verdict.
func (r *Report) Policy() string {
	switch r.Design {
	case DesignCapacity:
		return "policy: a change of the sustainable rate is called past its threshold only when the two sides' knee ranges do not overlap; a sweep the host distorted is not compared"
	case DesignSoak:
		return "policy: a trend fails past its limit per hour (a memory trend also past its noise floor over the run)"
	}
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
