package kb_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/kb"
	"github.com/perfgate/perfgate/internal/profile"
	"github.com/perfgate/perfgate/internal/store"
)

// profiles are the fingerprints of real scheduler-trace diffs, the sim's
// profiler fixtures: base against two runs of the same prefill-eagerness
// change, and against a uniform 30% slowdown.
func profiles(t *testing.T) map[string]*profile.Fingerprint {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "profile")
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
	}
}

func TestDistance(t *testing.T) {
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
			if got := d <= kb.DefaultThreshold; got != tc.match {
				t.Errorf("distance %.3f: match %v, want %v (threshold %.2f)", d, got, tc.match, kb.DefaultThreshold)
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

func TestRecordAndMatch(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kb.New(st)
	sigs := signatures(t)

	// Nothing recorded yet: no match.
	if _, _, ok, err := k.Match(ctx, "acme/llm", sigs["eager"]); err != nil || ok {
		t.Fatalf("match on an empty knowledge base: ok %v, %v", ok, err)
	}
	rec, err := k.Record(ctx, kb.Record{Repo: "acme/llm", Number: 123, URL: "https://github.com/acme/llm/pull/123",
		Commit: "1a95536cfa43be767a4c275a39b7be4808e9089c", CulpritPR: 57, Summary: "prefill interrupts decode",
		Cause: "scheduler priority change", FixURL: "https://github.com/acme/llm/pull/130", Signature: sigs["eager"], By: "maintainer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Record(ctx, kb.Record{Repo: "acme/llm", Cause: "uniform slowdown from a kernel change", Signature: sigs["slow"], By: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Record(ctx, kb.Record{Repo: "acme/llm", Cause: "  ", By: "x"}); err == nil || !strings.Contains(err.Error(), "/perf rootcause") {
		t.Errorf("a record without a cause: %v", err)
	}

	// The repeated regression matches the eager finding.
	got, d, ok, err := k.Match(ctx, "acme/llm", sigs["eager-again"])
	if err != nil || !ok || got.ID != rec.ID {
		t.Fatalf("repeated regression: %+v at %.3f, ok %v, %v; want record %d", got, d, ok, err, rec.ID)
	}
	line := kb.MatchLine(got, d)
	want := "looks like [#123](https://github.com/acme/llm/pull/123): prefill interrupts decode — scheduler priority change (distance 0.03); fix: https://github.com/acme/llm/pull/130"
	if line != want {
		t.Errorf("match line\n got %q\nwant %q", line, want)
	}
	// The slowdown matches its own record, not the eager one.
	if got, _, ok, _ := k.Match(ctx, "acme/llm", sigs["slow"]); !ok || got.ID == rec.ID {
		t.Errorf("slowdown matched %+v (ok %v), want the slowdown record", got, ok)
	}
	// Unrelated ones match nothing.
	for _, name := range []string{"ttft-only", "eager-reverted", "tpot-slow-profile", "throughput-drop"} {
		if got, d, ok, err := k.Match(ctx, "acme/llm", sigs[name]); err != nil || ok {
			t.Errorf("%s matched %q at %.3f (%v)", name, got.Cause, d, err)
		}
	}
	// Another repository's findings are not searched.
	if _, _, ok, _ := k.Match(ctx, "zeta/other", sigs["eager-again"]); ok {
		t.Error("matched a record of another repository")
	}
}

func TestMatchLine(t *testing.T) {
	cases := []struct {
		r    kb.Record
		d    float64
		want string
	}{
		{kb.Record{Number: 123, Summary: "prefill interrupts decode", Cause: "scheduler priority change"}, 0.08,
			"looks like #123: prefill interrupts decode — scheduler priority change (distance 0.08)"},
		{kb.Record{Commit: "1a95536cfa43be767a4c275a39b7be4808e9089c", Cause: "a\nmultiline   cause",
			Signature: kb.Signature{Metrics: []kb.MetricChange{moved("ttft_p99", 0.1), moved("tpot_p99", 0.25)}}}, 0.151,
			"looks like `1a95536`: tpot_p99 +25%, ttft_p99 +10% — a multiline cause (distance 0.15)"},
	}
	for _, tc := range cases {
		if got := kb.MatchLine(tc.r, tc.d); got != tc.want {
			t.Errorf("MatchLine\n got %q\nwant %q", got, tc.want)
		}
	}
}

func TestPhenomenon(t *testing.T) {
	s := kb.Signature{Metrics: []kb.MetricChange{moved("ttft_p99", -0.12), still("e2el_p99", 0.4), moved("output_throughput", -0.3), moved("tpot_p99", 0.22)}}
	if got, want := s.Phenomenon(), "output_throughput −30%, tpot_p99 +22%, ttft_p99 −12%"; got != want {
		t.Errorf("Phenomenon = %q, want %q", got, want)
	}
}
