package profile

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MinRelative is the smallest relative change a finding names.
const MinRelative = 0.20

// Change is one metric, base against head.
type Change struct {
	Key      string  // stable name: the fingerprint's and the knowledge base's
	Label    string  // what a reader calls it
	Row      string  // its table row: the label with the unit of a share or count
	Base     float64 // in the metric's unit: seconds, a share in [0, 1], or a count
	Head     float64
	Rel      float64 // (head − base) / max(|base|, floor): finite even when base is 0
	Notable  bool    // |Rel| ≥ MinRelative and the absolute change is meaningful
	BaseText string
	HeadText string
	Sentence string // e.g. "prefill interruptions of decode went up by 275% (24.8% → 93.1% of decoding steps)"
}

// Diff is base against head: every metric in table order, and the notable
// ones, largest first.
type Diff struct {
	Base, Head Summary
	Changes    []Change
	Findings   []Change
}

type unit int

const (
	unitDuration unit = iota
	unitShare
	unitNumber
)

// metric is one row of the comparison. floor keeps relative changes and
// the fingerprint's log ratios finite and calm near zero; minAbs is the
// absolute change below which a relative jump is noise. Quantiles of the
// step time are in the table but not in the fingerprint: steps are decode
// steps or much longer mixed ones, and a quantile that falls between the
// two modes jumps with a small change of mix.
type metric struct {
	key, label    string
	suffix        string // after a value in a sentence: " of decoding steps"
	unit          unit
	get           func(Summary) float64
	floor, minAbs float64
	fingerprint   bool
}

var metrics = []metric{
	{"step_mean", "step time mean", "", unitDuration, func(s Summary) float64 { return s.StepMean.Seconds() }, 1e-6, 50e-6, true},
	{"step_p50", "step time p50", "", unitDuration, func(s Summary) float64 { return s.StepP50.Seconds() }, 1e-6, 50e-6, false},
	{"step_p99", "step time p99", "", unitDuration, func(s Summary) float64 { return s.StepP99.Seconds() }, 1e-6, 100e-6, false},
	{"decode_step_p50", "decode-only step time p50", "", unitDuration, func(s Summary) float64 { return s.DecodeStepP50.Seconds() }, 1e-6, 50e-6, true},
	{"mixed_step_p50", "mixed step time p50", "", unitDuration, func(s Summary) float64 { return s.MixedStepP50.Seconds() }, 1e-6, 50e-6, true},
	{"prefill_interruption_rate", "prefill interruptions of decode", " of decoding steps", unitShare, func(s Summary) float64 { return s.InterruptionRate }, 0.02, 0.05, true},
	{"mixed_time_share", "busy time in mixed prefill+decode steps", "", unitShare, Summary.MixedShare, 0.02, 0.05, true},
	{"batch_mean", "batch size mean", " sequences", unitNumber, func(s Summary) float64 { return s.BatchMean }, 1, 0.5, true},
	{"idle_fraction", "idle time", " of busy+idle time", unitShare, Summary.IdleFraction, 0.05, 0.05, true},
	{"preemptions_per_kstep", "preemptions", " per 1000 steps", unitNumber, Summary.PreemptionsPerKStep, 1, 1, true},
	{"prefill_tokens_per_step", "prompt tokens per prefill step", "", unitNumber, Summary.PrefillTokensPerStep, 16, 16, true},
	{"cached_token_share", "prompt tokens from the prefix cache", "", unitShare, Summary.CachedShare, 0.02, 0.05, true},
	{"kv_usage_mean", "KV cache usage mean", "", unitShare, func(s Summary) float64 { return s.KVUsageMean }, 0.02, 0.05, true},
}

// Row is the metric's name in a table, with the unit of a share or count.
func (m metric) row() string {
	switch {
	case m.suffix == "":
		return m.label
	case m.unit == unitShare:
		return m.label + " (% " + strings.TrimSpace(m.suffix) + ")"
	default:
		return m.label + " (" + strings.TrimSpace(m.suffix) + ")"
	}
}

// Compare diffs two traces.
func Compare(base, head *Trace) Diff {
	return CompareSummaries(Summarize(base), Summarize(head))
}

// CompareSummaries diffs two summaries.
func CompareSummaries(base, head Summary) Diff {
	d := Diff{Base: base, Head: head}
	for _, m := range metrics {
		b, h := m.get(base), m.get(head)
		c := Change{
			Key: m.key, Label: m.label, Row: m.row(), Base: b, Head: h,
			Rel:      (h - b) / math.Max(math.Abs(b), m.floor),
			BaseText: m.format(b), HeadText: m.format(h),
		}
		c.Notable = math.Abs(c.Rel) >= MinRelative && math.Abs(h-b) >= m.minAbs
		dir := "up"
		if c.Rel < 0 {
			dir = "down"
		}
		c.Sentence = fmt.Sprintf("%s went %s by %s (%s → %s%s)", m.label, dir, percent(math.Abs(c.Rel)), c.BaseText, c.HeadText, m.suffix)
		d.Changes = append(d.Changes, c)
		if c.Notable {
			d.Findings = append(d.Findings, c)
		}
	}
	slices.SortStableFunc(d.Findings, func(a, b Change) int {
		return -cmpFloat(math.Abs(a.Rel), math.Abs(b.Rel))
	})
	return d
}

// Finding returns the notable change with key, if there is one.
func (d Diff) Finding(key string) (Change, bool) {
	for _, c := range d.Findings {
		if c.Key == key {
			return c, true
		}
	}
	return Change{}, false
}

func (m metric) format(v float64) string {
	switch m.unit {
	case unitDuration:
		return formatDuration(time.Duration(math.Round(v * 1e9)))
	case unitShare:
		return fmt.Sprintf("%.1f%%", 100*v)
	default:
		if v == math.Trunc(v) && math.Abs(v) < 1e6 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
}

func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
}

// percent formats a non-negative relative change.
func percent(r float64) string {
	if r >= 0.1 {
		return fmt.Sprintf("%.0f%%", 100*r)
	}
	return fmt.Sprintf("%.1f%%", 100*r)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
