package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/gate"
	"github.com/perfgate/perfgate/internal/result"
)

// FromGate fills a View's table, run counts, noise band, mismatches and
// notes from the gate's report. The caller sets Verdict (a regression is a
// Warning or Escalated depending on its deadline), SHA, Author and times.
func FromGate(v View, rep *gate.Report, env *result.Environment) View {
	v.Tier = rep.Tier
	v.BaselineRuns, v.CandidateRuns = rep.BaselineRuns, rep.CandidateRuns
	v.Confidence = strconv.FormatFloat(rep.Confidence*100, 'f', -1, 64) + "%"
	v.Evidence = rep.Evidence()
	v.Policy = strings.TrimPrefix(rep.Policy(), "policy: ")
	v.Excluded = append(v.Excluded, rep.ExcludedRuns...)
	v.Notes = append(v.Notes, rep.Notes...)
	for _, m := range rep.Metrics {
		row := rowOf(m)
		if m.Secondary {
			v.Secondary = append(v.Secondary, row)
			continue
		}
		v.Rows = append(v.Rows, row)
		if m.Note == "" && (m.Verdict == gate.MetricPass || m.Verdict == gate.MetricSame) {
			eq := strings.ReplaceAll(gate.Equivalence(m), " -", " −") // the table's minus sign
			v.Equivalence = append(v.Equivalence, displayName(m.Metric)+": "+eq)
		}
	}
	v.Notes = append(v.Notes, estimatorNotes(rep)...)
	// Each row carries its own noise band: no summary band to disagree
	// with it.
	v.NoiseBand = ""
	for _, mm := range rep.Mismatches {
		v.Mismatches = append(v.Mismatches, Mismatch{Field: mm.Field, Baseline: orDash(mm.Baseline), Candidate: orDash(mm.Candidate)})
	}
	if env != nil {
		v.Environment = environment(*env)
	}
	return v
}

func rowOf(m gate.MetricResult) Row {
	higherWorse := m.Direction != config.LowerIsWorse
	r := Row{Metric: displayName(m.Metric), Verdict: verdictCell(m.Verdict)}
	if isAbsolute(m) {
		// error_rate: a fraction compared as a difference in points.
		r.Baseline = FormatValue(100*m.Baseline, "%")
		r.Candidate = FormatValue(100*m.Candidate, "%")
		r.Delta = signedPoints(100 * m.Estimate)
		r.Threshold = "+" + strconv.FormatFloat(100*m.Threshold, 'f', -1, 64) + " pt"
		if m.Note == "" {
			r.Interval = "[" + signedPoints(100*m.CILow) + ", " + signedPoints(100*m.CIHigh) + "]"
			r.Noise = "±" + strings.TrimPrefix(signedPoints(100*m.NoiseBand), "+")
			r.P = formatP(m.HolmP)
		}
		return r
	}
	r.Baseline = FormatValue(m.Baseline, m.Unit)
	r.Candidate = FormatValue(m.Candidate, m.Unit)
	r.Delta = FormatDelta(m.Estimate)
	r.Threshold = FormatThreshold(m.Threshold, higherWorse)
	if m.Note == "" {
		r.Interval = "[" + FormatDelta(m.CILow) + ", " + FormatDelta(m.CIHigh) + "]"
		r.Noise = "±" + strings.TrimPrefix(FormatDelta(m.NoiseBand), "+")
		r.P = formatP(m.HolmP)
		if m.Secondary {
			r.P = formatP(m.P)
		}
	}
	return r
}

// formatP prints a p-value the way benchstat does: two digits.
func formatP(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return strconv.FormatFloat(p, 'g', 2, 64)
}

func isAbsolute(m gate.MetricResult) bool {
	_, name := splitCell(m.Metric)
	cm, ok := config.LookupMetric(name)
	return ok && cm.Absolute
}

// splitCell separates a nightly matrix cell's label ("c=16 tpot_p99") from
// the metric name.
func splitCell(metric string) (cell, name string) {
	if i := strings.LastIndexByte(metric, ' '); i >= 0 {
		return metric[:i], metric[i+1:]
	}
	return "", metric
}

func signedPoints(p float64) string {
	switch {
	case p >= 0.005:
		return fmt.Sprintf("+%.2f pt", p)
	case p <= -0.005:
		return fmt.Sprintf("−%.2f pt", -p)
	}
	return "0.00 pt"
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
		return "~"
	case gate.MetricInconclusive:
		return "❔ inconclusive"
	}
	return v
}

// displayName turns "tpot_p99" into "TPOT p99" and "output_throughput"
// into "output throughput".
func displayName(metric string) string {
	if cell, name := splitCell(metric); cell != "" {
		return cell + " · " + displayName(name)
	}
	name := metric
	series, stat, ok := strings.Cut(name, "_")
	switch series {
	case "ttft", "tpot", "itl", "e2el":
		if ok {
			return strings.ToUpper(series) + " " + stat
		}
	case "gpu":
		return "GPU " + strings.ReplaceAll(stat, "_", " ")
	}
	return strings.ReplaceAll(name, "_", " ")
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
	if e.Sim {
		gpu = "none: the built-in simulated engine"
	}
	add("GPU", gpu)
	if e.Driver != "" || e.CUDA != "" {
		add("driver / CUDA", orDash(e.Driver)+" / "+orDash(e.CUDA))
	}
	add("engine", engineIdentity(e.EngineImage))
	add("engine version", e.EngineVersion)
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
			out = append(out, displayName(m.Metric)+": "+rest)
		}
	}
	return out
}
