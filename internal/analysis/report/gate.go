package report

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// FromGate fills a View from the verdict document: its headline, its rows
// (every number printed by the document's own methods, as the check page
// and `perfgate compare` print them), run counts, mismatches and notes.
// It computes nothing. The caller sets Verdict (a regression is a Warning
// or Escalated depending on its deadline), SHA, Author and times.
func FromGate(v View, rep *gate.Report, env *result.Environment) View {
	v.Tier = rep.Tier
	v.Headline = rep.Headline
	v.BaselineRuns, v.CandidateRuns = rep.BaselineRuns, rep.CandidateRuns
	v.Confidence = figure.Level(rep.Confidence)
	v.Evidence = rep.Evidence()
	v.Policy = strings.TrimPrefix(rep.Policy(), "policy: ")
	v.Excluded = append(v.Excluded, rep.ExcludedRuns...)
	v.Notes = append(v.Notes, rep.Notes...)
	for _, m := range rep.Metrics {
		row := RowOf(m)
		if m.Secondary {
			v.Secondary = append(v.Secondary, row)
			continue
		}
		v.Rows = append(v.Rows, row)
	}
	v.Notes = append(v.Notes, estimatorNotes(rep)...)
	for _, mm := range rep.Mismatches {
		v.Mismatches = append(v.Mismatches, Mismatch{Field: mm.Field, Baseline: orDash(mm.Baseline), Candidate: orDash(mm.Candidate)})
	}
	if env != nil {
		v.Environment = environment(*env)
	}
	return v
}

// WithSettings adds the base/head diff of the engine's effective settings
// (result.DiffSettings) to v: it computes nothing.
func WithSettings(v View, d *result.SettingsDiff) View {
	if d.Empty() {
		return v
	}
	for _, c := range d.Changed {
		v.Settings = append(v.Settings, SettingRow{Name: c.Name, Base: orDash(c.Base), Head: orDash(c.Head), Source: c.Source})
	}
	for _, e := range d.NoEffect {
		v.NoEffect = append(v.NoEffect, e.Sentence())
	}
	for _, e := range d.Effect {
		v.Effect = append(v.Effect, e.EffectSentence())
	}
	return v
}

// Annotations mark the pull request's knob lines on the check run: a
// warning on a line the engine did not act on, a notice on one that took
// effect, each with the engine's evidence — and, for one that took
// effect, what the gate measured for the whole change (rep's own
// figures; nil leaves them out). At most GitHub's 50.
func Annotations(d *result.SettingsDiff, rep *gate.Report) []check.Annotation {
	if d.Empty() {
		return nil
	}
	measured := ""
	if rep != nil {
		var parts []string
		for _, m := range rep.Metrics {
			if !m.Secondary {
				parts = append(parts, m.Name()+" "+m.DeltaText())
			}
		}
		if len(parts) > 0 {
			measured = "; measured for the whole change: " + strings.Join(parts, ", ")
		}
	}
	var out []check.Annotation
	for _, e := range d.NoEffect {
		out = append(out, check.Annotation{Path: e.Change.File, Line: e.Change.Line, Level: "warning",
			Title: "No effect on the engine", Message: e.Sentence()})
	}
	for _, e := range d.Effect {
		out = append(out, check.Annotation{Path: e.Change.File, Line: e.Change.Line, Level: "notice",
			Title: "Took effect on the engine", Message: e.EffectSentence() + measured})
	}
	if len(out) > check.MaxAnnotations {
		out = out[:check.MaxAnnotations]
	}
	return out
}

// RowOf is one row of the verdict document as the tables print it.
func RowOf(m gate.MetricResult) Row {
	return Row{
		Metric: m.Name(), Baseline: m.ValueText(m.Baseline), Candidate: m.ValueText(m.Candidate),
		Delta: m.DeltaText(), Threshold: m.ThresholdText(), Verdict: verdictCell(m.Verdict),
		Interval: m.IntervalText(), Noise: m.BandText(), Detectable: m.DetectableText(), Rule: m.RuleText(),
		Matters: m.Verdict == gate.MetricRegression || m.Verdict == gate.MetricInconclusive || m.Verdict == gate.MetricImprovement,
	}
}

func verdictCell(v string) string {
	switch v {
	case gate.MetricRegression:
		return "❌ regression"
	case gate.MetricImprovement:
		return "🚀 improvement"
	case gate.MetricPass:
		return "✅ pass"
	case gate.MetricSame:
		return "~ no change"
	case gate.MetricInconclusive:
		return "❔ inconclusive"
	}
	return v
}

func environment(e result.Environment) []KV {
	var kv []KV
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, KV{k, v})
		}
	}
	gpu := e.GPUName
	if e.GPUUUID != "" {
		gpu = strings.TrimSpace(gpu + " (" + e.GPUUUID + ")")
	}
	switch {
	case e.Sim:
		gpu = "none: the built-in simulated engine"
	case e.FakeGPU:
		// The runner's scripted card: name no model, driver or CUDA.
		gpu = "none: the runner's simulated card (--fake-gpu); the engine ran on the CPU"
	}
	add("GPU", gpu)
	if (e.Driver != "" || e.CUDA != "") && !e.Sim && !e.FakeGPU {
		add("driver / CUDA", orDash(e.Driver)+" / "+orDash(e.CUDA))
	}
	if e.CPUModel != "" {
		cpu := e.CPUModel
		if e.CPUCores > 0 {
			cpu += fmt.Sprintf(" · %d cores", e.CPUCores)
		}
		if e.CPUGovernor != "" {
			cpu += " · governor " + e.CPUGovernor
		}
		add("CPU", cpu)
	}
	engine := e.EngineImage
	if e.EngineCommand != "" {
		engine = e.EngineCommand // as it ran, not the configured template
	}
	add("engine", engineIdentity(engine))
	add("engine version", strings.TrimSpace(e.EngineName+" "+e.EngineVersion))
	add("commit", e.Commit)
	add("source tree", e.SourceTree)
	add("sandbox", sandboxWords(e.Sandbox))
	add("host", e.Hostname)
	return kv
}

// sandboxWords says how the engine was contained, so a reader sees when a
// runner ran the PR's code on the host.
func sandboxWords(s string) string {
	switch s {
	case "":
		return ""
	case "container":
		return "container: read-only checkout, no network, no agent credentials"
	case "uncontained":
		return "**none**: the runner allows uncontained engines (allow_uncontained), so the PR's code ran on the host"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// VerdictOf maps the gate's verdict to the check's before any deadline is
// considered: a fresh regression is a Warning.
func VerdictOf(v gate.Verdict) Verdict {
	switch v {
	case gate.Pass:
		return Pass
	case gate.Regression:
		return Warning
	}
	return Inconclusive
}

// goBuildPath is a path into Go's build cache or a `go run` temporary
// directory: it changes with every build and says nothing about the engine.
var goBuildPath = regexp.MustCompile(`\S*/go-build[^\s/]*/(?:[^\s/]+/)*([^\s/]+)`)

// engineIdentity is the engine as a reader recognises it: an image, or a
// command with Go build-cache paths reduced to the program's name.
func engineIdentity(s string) string {
	return goBuildPath.ReplaceAllString(s, "$1")
}

// estimatorNotes say what the estimates rest on: the unit (once, as the
// gated metrics share it) and, per gated metric, what was left out or
// widened, with the rule's breakdown.
func estimatorNotes(rep *gate.Report) []string {
	var out []string
	unit := ""
	for _, m := range rep.Metrics {
		if m.Secondary || m.Estimator == "" {
			continue
		}
		first, rest, _ := strings.Cut(m.Estimator, "; ")
		if unit == "" {
			unit = first
			out = append(out, "estimate: "+first)
		}
		if rest != "" {
			out = append(out, m.Name()+": "+rest)
		}
	}
	return out
}
