package kb_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/kb"
	"github.com/perfgate/perfgate/internal/analysis/profile"
	kbstore "github.com/perfgate/perfgate/internal/github/kb"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// signatures are a few of internal/analysis/kb's test regressions: the
// metric moves are the gate's view of each case (synthetic inputs), the
// profiles the real diffs of the sim's profiler fixtures (base against a
// prefill-eagerness change, twice, and against a uniform 30% slowdown).
func signatures(t *testing.T) map[string]kb.Signature {
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
	p := map[string]*profile.Fingerprint{}
	for _, name := range []string{"eager", "eager-again", "slow"} {
		f := profile.Compare(base, read(name)).Fingerprint()
		p[name] = &f
	}
	moved := func(metric string, change float64) kb.MetricChange {
		m, _ := config.LookupMetric(metric)
		return kb.MetricChange{Metric: metric, Change: change, Direction: m.Natural, Moved: true}
	}
	still := func(metric string, change float64) kb.MetricChange {
		c := moved(metric, change)
		c.Moved = false
		return c
	}
	return map[string]kb.Signature{
		"eager":             {Metrics: []kb.MetricChange{moved("tpot_p99", 0.22), moved("ttft_p99", -0.12), still("output_throughput", -0.01)}, Profile: p["eager"]},
		"eager-again":       {Metrics: []kb.MetricChange{moved("tpot_p99", 0.15), moved("ttft_p99", -0.03), still("output_throughput", 0.005)}, Profile: p["eager-again"]},
		"slow":              {Metrics: []kb.MetricChange{moved("tpot_p99", 0.3), moved("ttft_p99", 0.28), moved("output_throughput", -0.23)}, Profile: p["slow"]},
		"tpot-slow-profile": {Metrics: []kb.MetricChange{moved("tpot_p99", 0.22), moved("ttft_p99", -0.12), still("output_throughput", -0.01)}, Profile: p["slow"]},
		"ttft-only":         {Metrics: []kb.MetricChange{still("tpot_p99", 0.01), moved("ttft_p99", 0.25), still("output_throughput", 0)}},
		"eager-reverted":    {Metrics: []kb.MetricChange{moved("tpot_p99", -0.18), moved("ttft_p99", 0.1), still("output_throughput", 0.01)}},
		"throughput-drop":   {Metrics: []kb.MetricChange{moved("output_throughput", -0.2), still("tpot_p99", 0)}},
	}
}

func TestRecordAndMatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kbstore.New(st)
	sigs := signatures(t)

	// Nothing recorded yet: no match.
	if v, err := k.Match(ctx, "acme/llm", sigs["eager"]); err != nil || v.OK || len(v.NeedsProfile) > 0 {
		t.Fatalf("match on an empty knowledge base: %+v, %v", v, err)
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

	// The repeated regression matches the eager finding, on both parts.
	v, err := k.Match(ctx, "acme/llm", sigs["eager-again"])
	if err != nil || !v.OK || v.Match.Record.ID != rec.ID {
		t.Fatalf("repeated regression: %+v, %v; want record %d", v, err, rec.ID)
	}
	line := kb.MatchLine(v.Match)
	want := "looks like [#123](https://github.com/acme/llm/pull/123): prefill interrupts decode — scheduler priority change (strong (profile and metrics: profile similarity 1.00, metric shape 0.94); agreeing: prefill_interruption_rate ↑, prefill_tokens_per_step ↓, tpot_p99 worse, ttft_p99 better); fix: https://github.com/acme/llm/pull/130"
	if line != want {
		t.Errorf("match line\n got %q\nwant %q", line, want)
	}
	// The slowdown matches its own record, not the eager one.
	if v, _ := k.Match(ctx, "acme/llm", sigs["slow"]); !v.OK || v.Match.Record.ID == rec.ID {
		t.Errorf("slowdown matched %+v, want the slowdown record", v.Match.Record)
	}
	// Unrelated ones match nothing.
	for _, name := range []string{"ttft-only", "eager-reverted", "tpot-slow-profile", "throughput-drop"} {
		if v, err := k.Match(ctx, "acme/llm", sigs[name]); err != nil || v.OK {
			t.Errorf("%s matched %q: %s (%v)", name, v.Match.Record.Cause, v.Match.Words(), err)
		}
	}
	// Another repository's findings are not searched.
	if v, _ := k.Match(ctx, "zeta/other", sigs["eager-again"]); v.OK {
		t.Error("matched a record of another repository")
	}
}
