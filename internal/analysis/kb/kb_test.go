package kb_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/kb"
	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// profiles are the fingerprints of real scheduler-trace diffs, the sim's
// profiler fixtures: base against two runs of the same prefill-eagerness
// change, against a uniform 30% slowdown, and against a costlier batch.
func profiles(t *testing.T) map[string]*profile.Fingerprint {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "testdata", "profile")
	read := func(name string) *profile.Trace {
		tr, err := profile.ReadFile(filepath.Join(dir, name+".trace.json.gz"))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	base := read("base")
	out := map[string]*profile.Fingerprint{}
	for _, name := range []string{"eager", "eager-again", "slow"} {
		f := profile.Compare(base, read(name)).Fingerprint()
		out[name] = &f
	}
	// A batch-cost rise (per-sequence step cost ×3), profiled the same way
	// as the fixtures above; kept here.
	bc, err := profile.ReadFile(filepath.Join("testdata", "batchcost.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	f := profile.Compare(base, bc).Fingerprint()
	out["batchcost"] = &f
	return out
}

// moved is a gated metric the gate found changed.
func moved(metric string, change float64) kb.MetricChange {
	m, _ := config.LookupMetric(metric)
	return kb.MetricChange{Metric: metric, Change: change, Direction: m.Natural, Moved: true}
}

func still(metric string, change float64) kb.MetricChange {
	c := moved(metric, change)
	c.Moved = false
	return c
}

// The metric moves are the gate's view of each case (synthetic inputs); the
// profiles are the real diffs.
func signatures(t *testing.T) map[string]kb.Signature {
	p := profiles(t)
	return map[string]kb.Signature{
		// Prefill let into running decode batches: decode stalls (TPOT up),
		// prompts start sooner (TTFT down).
		"eager": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.22), moved("ttft_p99", -0.12), still("output_throughput", -0.01)}, Profile: p["eager"]},
		// The same change again, a little smaller, on another PR.
		"eager-again": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.15), moved("ttft_p99", -0.03), still("output_throughput", 0.005)}, Profile: p["eager-again"]},
		// The same again before its profile was taken.
		"eager-no-profile": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.17), moved("ttft_p99", -0.15), still("output_throughput", 0)}},
		// Everything 30% slower.
		"slow": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.3), moved("ttft_p99", 0.28), moved("output_throughput", -0.23)}, Profile: p["slow"]},
		// TPOT up as in "eager", but the profile of a uniform slowdown.
		"tpot-slow-profile": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.22), moved("ttft_p99", -0.12), still("output_throughput", -0.01)}, Profile: p["slow"]},
		// Other metrics: only the prompt path got slower.
		"ttft-only": {Metrics: []kb.MetricChange{still("tpot_p99", 0.01), moved("ttft_p99", 0.25), still("output_throughput", 0)}},
		// The opposite: a fix of the eager change.
		"eager-reverted": {Metrics: []kb.MetricChange{moved("tpot_p99", -0.18), moved("ttft_p99", 0.1), still("output_throughput", 0.01)}},
		// Throughput regressions point the same way as latency ones.
		"throughput-drop":       {Metrics: []kb.MetricChange{moved("output_throughput", -0.2), still("tpot_p99", 0)}},
		"throughput-drop-again": {Metrics: []kb.MetricChange{moved("output_throughput", -0.1), still("tpot_p99", 0.004)}},

		// The false matches, on the metrics the scheduler demo gates
		// (tpot_p90, tpot_median): the recorded scheduler-eagerness cause,
		// a uniform 25% slowdown and a batch-cost rise all read "TPOT up".
		"demo-eager":           {Metrics: []kb.MetricChange{moved("tpot_p90", 0.19), moved("tpot_median", 0.17)}, Profile: p["eager"]},
		"demo-eager-again":     {Metrics: []kb.MetricChange{moved("tpot_p90", 0.16), moved("tpot_median", 0.15)}, Profile: p["eager-again"]},
		"demo-eager-queued":    {Metrics: []kb.MetricChange{moved("tpot_p90", 0.16), moved("tpot_median", 0.15)}},
		"demo-uniform":         {Metrics: []kb.MetricChange{moved("tpot_p90", 0.25), moved("tpot_median", 0.25)}, Profile: p["slow"]},
		"demo-uniform-queued":  {Metrics: []kb.MetricChange{moved("tpot_p90", 0.25), moved("tpot_median", 0.25)}},
		"demo-batchcost":       {Metrics: []kb.MetricChange{moved("tpot_p90", 0.21), moved("tpot_median", 0.22)}, Profile: p["batchcost"]},
		"demo-batchcost-early": {Metrics: []kb.MetricChange{moved("tpot_p90", 0.21), moved("tpot_median", 0.22)}},
	}
}

func TestDistance(t *testing.T) {
	t.Parallel()
	sigs := signatures(t)
	cases := []struct {
		a, b  string
		match bool
	}{
		{"eager", "eager-again", true},
		{"eager", "eager-no-profile", true},
		{"throughput-drop", "throughput-drop-again", true},
		{"eager", "slow", false},
		{"eager", "tpot-slow-profile", false},
		{"eager", "ttft-only", false},
		{"eager", "eager-reverted", false},
		{"eager", "throughput-drop", false},
	}
	for _, tc := range cases {
		t.Run(tc.a+"~"+tc.b, func(t *testing.T) {
			d := kb.Distance(sigs[tc.a], sigs[tc.b])
			if back := kb.Distance(sigs[tc.b], sigs[tc.a]); math.Abs(back-d) > 1e-12 {
				t.Errorf("distance is not symmetric: %g and %g", d, back)
			}
			if got := d <= 0.2; got != tc.match {
				t.Errorf("distance %.3f: match %v, want %v ", d, got, tc.match)
			}
			t.Logf("distance %.3f", d)
		})
	}
	if d := kb.Distance(sigs["eager"], sigs["eager-reverted"]); d < 1.5 {
		t.Errorf("a revert is %.2f from the regression, want near 2 (opposite)", d)
	}
	if d := kb.Distance(kb.Signature{}, sigs["eager"]); !math.IsInf(d, 1) {
		t.Errorf("an empty signature is %.2f away, want +Inf (nothing to compare)", d)
	}
}

// TestJudge: a match is evidence. The records are the recorded
// scheduler-eagerness cause (with its profile) and, for the metrics-only
// rule, a cause recorded before any profile; the regressions are the
// issue's false matches — a uniform 25% slowdown and a batch-cost rise,
// which on gated TPOT alone read like the scheduler cause — and the real
// repeat, before and after its profile.
func TestJudge(t *testing.T) {
	t.Parallel()
	sigs := signatures(t)
	eager := kb.Record{ID: 21, Number: 21, Cause: "scheduler eagerness turned up", Signature: sigs["demo-eager"]}
	noProfile := kb.Record{ID: 7, Number: 7, Cause: "throughput drop", Signature: sigs["throughput-drop"]}
	cases := []struct {
		name         string
		records      []kb.Record
		sig          string
		match        int64 // the record matched, 0 for none
		strength     kb.Strength
		needsProfile int64 // the record a profile would decide, 0 for none
	}{
		{"the same scheduler change, profiled", []kb.Record{eager}, "demo-eager-again", 21, kb.Strong, 0},
		// Its profile is queued: no match yet, the profile decides.
		{"the same scheduler change, profile queued", []kb.Record{eager}, "demo-eager-queued", 0, "", 21},
		// The false matches: metric shape 1.00, profile far.
		{"uniform 25% slowdown, profiled", []kb.Record{eager}, "demo-uniform", 0, "", 0},
		{"batch-cost rise, profiled", []kb.Record{eager}, "demo-batchcost", 0, "", 0},
		// Before their profiles they are not told "looks like #21" either.
		{"uniform 25% slowdown, no profile yet", []kb.Record{eager}, "demo-uniform-queued", 0, "", 21},
		{"batch-cost rise, no profile yet", []kb.Record{eager}, "demo-batchcost-early", 0, "", 21},
		// The metric shape alone rules a record out: a revert is not asked about.
		{"a revert", []kb.Record{{ID: 3, Cause: "eager", Signature: sigs["eager"]}}, "eager-reverted", 0, "", 0},
		// A record without a profile matches on the metric shape, weakly.
		{"metrics-only record", []kb.Record{noProfile}, "throughput-drop-again", 7, kb.Weak, 0},
		{"metrics-only record, other shape", []kb.Record{noProfile}, "ttft-only", 0, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := kb.Judge(tc.records, sigs[tc.sig])
			var got int64
			if v.OK {
				got = v.Match.Record.ID
			}
			if got != tc.match || (v.OK && v.Match.Strength != tc.strength) {
				t.Errorf("matched record %d (%s), want %d (%s)", got, v.Match.Words(), tc.match, tc.strength)
			}
			var np int64
			if len(v.NeedsProfile) > 0 {
				np = v.NeedsProfile[0].Record.ID
			}
			if np != tc.needsProfile {
				t.Errorf("needs a profile to decide record %d, want %d", np, tc.needsProfile)
			}
			for _, r := range tc.records {
				sig := sigs[tc.sig]
				ms := 1 - kb.Distance(kb.Signature{Metrics: sig.Metrics}, kb.Signature{Metrics: r.Signature.Metrics})
				line := fmt.Sprintf("against record %d: metric shape %.3f", r.ID, ms)
				if math.IsInf(ms, 0) {
					line = fmt.Sprintf("against record %d: no moved metric in common", r.ID)
				}
				if sig.Profile != nil && r.Signature.Profile != nil {
					line += fmt.Sprintf(", profile similarity %.3f", 1-kb.Distance(kb.Signature{Profile: sig.Profile}, kb.Signature{Profile: r.Signature.Profile}))
				}
				t.Log(line)
			}
		})
	}
}

func TestMatchLine(t *testing.T) {
	t.Parallel()
	sigs := signatures(t)
	v := kb.Judge([]kb.Record{{Commit: "1a95536cfa43be767a4c275a39b7be4808e9089c", Cause: "a\nmultiline   cause", Signature: sigs["throughput-drop"]}}, sigs["throughput-drop-again"])
	want := "moved its metrics like `1a95536`: output_throughput −20% — a multiline cause (weak (metrics only: metric shape 1.00); agreeing: output_throughput worse); no profile of the recorded cause to compare, so this is a hint, not a diagnosis"
	if got := kb.MatchLine(v.Match); got != want {
		t.Errorf("MatchLine\n got %q\nwant %q", got, want)
	}
	eager := kb.Record{Number: 21, Cause: "scheduler eagerness turned up", Signature: sigs["demo-eager"]}
	v = kb.Judge([]kb.Record{eager}, sigs["demo-uniform-queued"])
	for _, queued := range []bool{true, false} {
		line := kb.PendingLine(v, queued)
		if !strings.Contains(line, "#21") || !strings.Contains(line, "uniform slowdown") || strings.Contains(line, "looks like") {
			t.Errorf("pending line (queued %v): %q", queued, line)
		}
	}
	if kb.PendingLine(kb.Verdict{}, true) != "" {
		t.Error("a pending line without a candidate")
	}
}

func TestPhenomenon(t *testing.T) {
	t.Parallel()
	s := kb.Signature{Metrics: []kb.MetricChange{moved("ttft_p99", -0.12), still("e2el_p99", 0.4), moved("output_throughput", -0.3), moved("tpot_p99", 0.22)}}
	if got, want := s.Phenomenon(), "output_throughput −30%, tpot_p99 +22%, ttft_p99 −12%"; got != want {
		t.Errorf("Phenomenon = %q, want %q", got, want)
	}
}
