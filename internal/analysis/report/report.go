// Package report renders the gate's verdict as GitHub markdown: the check
// run's title, summary and text, and the PR comment. The words live in the
// templates/ directory; this package formats numbers, aligns tables and keeps
// every field under GitHub's size limits.
package report

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/templates"
)

// GitHub's limits: a check run's output.summary and output.text are at most
// 65,535 characters each; an issue comment at most 65,536.
const (
	MaxCheckField = 65535
	MaxComment    = 65536
)

// Verdict is what the check says, in the order a reader cares about it.
type Verdict string

const (
	Pass         Verdict = "pass"
	Warning      Verdict = "warning"   // a regression inside its grace period: neutral check
	Escalated    Verdict = "escalated" // a regression past its deadline: failure
	Inconclusive Verdict = "inconclusive"
	Accepted     Verdict = "accepted" // a regression a maintainer accepted on appeal
	Skipped      Verdict = "skipped"
	Broken       Verdict = "broken" // the repo's config or the run itself is unusable
)

// View is everything the templates show. Values arrive already formatted
// (units, signs) from FromGate or from the caller.
type View struct {
	Tier string
	// Headline is the verdict document's one-sentence verdict; it leads
	// every gate verdict's summary and comment.
	Headline      string
	Verdict       Verdict
	SHA           string
	Author        string
	Deadline      time.Time
	EscalateAfter time.Duration
	Rows          []Row // gated metrics
	Secondary     []Row // secondary metrics, looser thresholds
	Mismatches    []Mismatch
	Environment   []KV
	// Settings is what the engine ran with on each side, where the two
	// differ, and NoEffect the pull request's knob lines the engine did
	// not act on (WithSettings); Effect those it did.
	Settings      []SettingRow
	NoEffect      []string
	Effect        []string
	BaselineRuns  int
	CandidateRuns int
	Confidence    string
	// Evidence says what the verdict rests on (runs or pairs, sessions,
	// history, the look and the α it spent); Policy how the tier judges.
	// Both come from the gate's report; empty hides them.
	Evidence string
	Policy   string
	// NeedsAck marks an inconclusive check the tier holds (action
	// required) until a maintainer acknowledges it with `/perf ack` or
	// more runs decide. The caller sets it when it concludes the check
	// that way (gate.Report.NeedsAck says when the policy asks for it).
	NeedsAck bool
	Excluded []string
	// Cost is what a regression costs a month at the repository's
	// declared price (CostOf); nil when the repository declared none.
	// Shown on regression verdicts only.
	Cost      *cost.Estimate
	Notes     []string
	Problems  []string // for Broken: what is wrong, quoted in the summary
	RunDetail string   // markdown detail, truncated first
	// Detail is markdown the maintainer's fold carries after the
	// document's own details: a capacity check's sweeps (the SLO, the
	// latency–throughput table with the knees). It holds no verdict.
	Detail string
	Log    string // runner log tail, truncated first
}

// Row is one line of the regression table, printed by the verdict
// document's methods (RowOf). Delta is the change the test used, and the
// value columns are the baseline and the baseline moved by Delta. The
// maintainer's columns — the interval at the level of the rule that
// decided, the noise band, the smallest change the evidence could call,
// the rule — go in the details fold; Matters marks the rows an author's
// first screen shows.
type Row struct {
	Metric, Baseline, Candidate, Delta, Threshold, Verdict string
	Interval, Noise, Detectable, Rule                      string
	Matters                                                bool
}

// Mismatch is one environment field that differs.
type Mismatch struct{ Field, Baseline, Candidate string }

// SettingRow is one effective engine setting that differs between the
// base and the head.
type SettingRow struct{ Name, Base, Head, Source string }

// KV is one environment line.
type KV struct{ Key, Value string }

// Check is a rendered check-run output.
type Check struct {
	Title, Summary, Text string
}

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{"join": strings.Join}).ParseFS(templates.FS, "*.md.tmpl"))

// RenderCheck renders the check run's title, summary and text. When the
// summary would pass GitHub's limit, detail goes first (notes, environment,
// secondary metrics) and the regression table stays.
func RenderCheck(v View) (Check, error) {
	summary, err := renderSummary(v)
	if err != nil {
		return Check{}, err
	}
	text, err := renderText(v)
	if err != nil {
		return Check{}, err
	}
	return Check{Title: title(v), Summary: summary, Text: text}, nil
}

// RenderComment renders the PR comment for a warning or an escalation.
func RenderComment(v View) (string, error) {
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "comment.md.tmpl", commentDataOf(v)); err != nil {
		return "", fmt.Errorf("render comment: %w", err)
	}
	return truncate(buf.String(), MaxComment), nil
}

func renderSummary(v View) (string, error) {
	// Each step drops detail a reader can live without, the table last.
	steps := []func(*View){
		func(*View) {},
		func(v *View) { v.Notes = nil },
		func(v *View) { v.Environment = nil },
		func(v *View) { v.Detail = "" },
		func(v *View) { v.Secondary = nil },
		func(v *View) { v.Mismatches = capMismatches(v.Mismatches, 20) },
		func(v *View) { v.Problems = capLines(v.Problems, 50) },
	}
	var out string
	for _, step := range steps {
		step(&v)
		var buf bytes.Buffer
		if err := tmpl.ExecuteTemplate(&buf, "check_summary.md.tmpl", summaryDataOf(v)); err != nil {
			return "", fmt.Errorf("render check summary: %w", err)
		}
		out = buf.String()
		if utf8.RuneCountInString(out) <= MaxCheckField {
			return out, nil
		}
	}
	return truncate(out, MaxCheckField), nil
}

func renderText(v View) (string, error) {
	for _, step := range []func(*View){
		func(*View) {},
		func(v *View) { v.Log = tail(v.Log, 20000) },
		func(v *View) { v.Log = "" },
		func(v *View) { v.RunDetail = "" },
	} {
		step(&v)
		var buf bytes.Buffer
		if err := tmpl.ExecuteTemplate(&buf, "check_text.md.tmpl", v); err != nil {
			return "", fmt.Errorf("render check text: %w", err)
		}
		if out := buf.String(); utf8.RuneCountInString(out) <= MaxCheckField {
			return out, nil
		}
	}
	return truncate(fmt.Sprintf("(%d excluded runs; detail omitted: too long for a check run)", len(v.Excluded)), MaxCheckField), nil
}

func title(v View) string {
	n := countVerdict(v.Rows, "regression")
	switch v.Verdict {
	case Pass:
		if imp := countVerdict(v.Rows, "improvement"); imp > 0 {
			return fmt.Sprintf("No regression; %d %s improved", imp, figure.Plural(imp, "metric", "metrics"))
		}
		return "No regression"
	case Warning:
		return fmt.Sprintf("Warning: %d %s regressed", n, figure.Plural(n, "metric", "metrics"))
	case Escalated:
		return fmt.Sprintf("Blocking: %d %s regressed", n, figure.Plural(n, "metric", "metrics"))
	case Accepted:
		return "Regression accepted on appeal"
	case Inconclusive:
		if len(v.Mismatches) > 0 {
			return "Inconclusive: environment differs from the baseline"
		}
		if v.NeedsAck {
			return "Inconclusive: needs a maintainer's acknowledgement"
		}
		return "Inconclusive"
	case Skipped:
		return "Skipped: no matching changes"
	case Broken:
		return "perfgate could not run"
	}
	return string(v.Verdict)
}

func countVerdict(rows []Row, word string) int {
	n := 0
	for _, r := range rows {
		if strings.Contains(r.Verdict, word) {
			n++
		}
	}
	return n
}

func capMismatches(m []Mismatch, n int) []Mismatch {
	if len(m) <= n {
		return m
	}
	return append(m[:n:n], Mismatch{Field: fmt.Sprintf("… %d more", len(m)-n)})
}

func capLines(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
}

// truncate cuts s to at most max runes, saying so.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	const note = "\n\n… (truncated: GitHub's size limit)"
	r := []rune(s)
	return string(r[:max-utf8.RuneCountInString(note)]) + note
}

// tail keeps the last n runes of s, starting at a line boundary.
func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	t := string(r[len(r)-n:])
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[i+1:]
	}
	return "… (earlier lines omitted)\n" + t
}
