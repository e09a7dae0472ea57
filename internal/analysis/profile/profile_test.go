package profile_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/profile"
)

func load(t *testing.T, name string) *profile.Trace {
	t.Helper()
	tr, err := profile.ReadFile(filepath.Join(fixtureDir, name+".trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(fixtureDir, name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/analysis/profile -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestDiffNamesPrefillInterruptionsWhenOnlyEagernessChanged(t *testing.T) {
	t.Parallel()
	base, eager := load(t, "base"), load(t, "eager")
	d := profile.Compare(base, eager)
	c, ok := d.Finding("prefill_interruption_rate")
	if !ok {
		t.Fatalf("the diff does not name prefill interruptions; findings: %v\n%s", d.Findings, d.Markdown())
	}
	if c.Rel < 0.5 {
		t.Errorf("prefill interruptions up %.0f%%, want a large rise", 100*c.Rel)
	}
	if !strings.HasPrefix(c.Sentence, "prefill interruptions of decode went up by ") {
		t.Errorf("sentence %q", c.Sentence)
	}
	if d.Findings[0].Key != "prefill_interruption_rate" && d.Findings[0].Key != "mixed_time_share" {
		t.Errorf("the largest finding is %q, not the interruptions", d.Findings[0].Key)
	}
	golden(t, "diff-eager.md", d.Markdown())
}

func TestDiffOfASlowdownDoesNotBlamePrefill(t *testing.T) {
	t.Parallel()
	d := profile.Compare(load(t, "base"), load(t, "slow"))
	if c, ok := d.Finding("prefill_interruption_rate"); ok {
		t.Errorf("a uniform slowdown named prefill interruptions: %s", c.Sentence)
	}
	if _, ok := d.Finding("decode_step_p50"); !ok {
		t.Errorf("a 30%% slowdown is not in the findings:\n%s", d.Markdown())
	}
	golden(t, "diff-slow.md", d.Markdown())
}

func TestFingerprintMatchesTheSameCause(t *testing.T) {
	t.Parallel()
	base := load(t, "base")
	eager := profile.Compare(base, load(t, "eager")).Fingerprint()
	again := profile.Compare(base, load(t, "eager-again")).Fingerprint()
	slow := profile.Compare(base, load(t, "slow")).Fingerprint()
	same, err := eager.Distance(again)
	if err != nil {
		t.Fatal(err)
	}
	other, err := eager.Distance(slow)
	if err != nil {
		t.Fatal(err)
	}
	if same >= other/2 {
		t.Errorf("distance to the same cause %.3f, to a slowdown %.3f: want the same cause much closer", same, other)
	}
	self := profile.Compare(base, base).Fingerprint()
	for i, v := range self.Values {
		if v != 0 {
			t.Errorf("a trace against itself: %s = %g", self.Keys[i], v)
		}
	}
	if _, err := eager.Distance(profile.Fingerprint{Keys: eager.Keys[:3], Values: eager.Values[:3]}); err == nil {
		t.Error("fingerprints of different lengths compared")
	}
}

func TestWriteParseRoundTrip(t *testing.T) {
	t.Parallel()
	in := &profile.Trace{
		Engine: "perfgate-sim", Model: "m", Start: time.Unix(1700000000, 123),
		Config: map[string]any{"prefill_eagerness": 0.5},
		Steps: []profile.Step{
			{Start: 0, Dur: 4 * time.Millisecond, PrefillTokens: 64, CachedTokens: 16, PrefillSeqs: 2, Running: 2, Waiting: 1, KVUsage: 0.25},
			{Start: 4 * time.Millisecond, Dur: 2500 * time.Microsecond, DecodeTokens: 2, DecodeSeqs: 2, Running: 2, Preemptions: 1, KVUsage: 0.5},
		},
		Idle: []profile.Span{{Start: 6500 * time.Microsecond, Dur: 1234567 * time.Nanosecond}},
	}
	var buf bytes.Buffer
	if err := profile.Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if out.Engine != in.Engine || out.Model != in.Model || !out.Start.Equal(in.Start) || out.Config["prefill_eagerness"] != 0.5 {
		t.Errorf("header %+v", out)
	}
	if len(out.Steps) != 2 || out.Steps[0] != in.Steps[0] || out.Steps[1] != in.Steps[1] {
		t.Errorf("steps %+v", out.Steps)
	}
	if len(out.Idle) != 1 || out.Idle[0] != in.Idle[0] {
		t.Errorf("idle %+v", out.Idle)
	}
	// Gzipped, as vLLM writes its traces.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := profile.Parse(&gz); err != nil || len(out.Steps) != 2 {
		t.Errorf("gzipped: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, in, want string }{
		{"not json", `{"traceEvents": [`, "decode chrome trace"},
		{"no steps", `{"traceEvents":[{"name":"aten::mm","ph":"X","ts":1,"dur":2,"pid":1,"tid":1}]}`, "no scheduler steps"},
		{"bad args", `[{"name":"decode","cat":"step","ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"args":{"decode_seqs":"many"}}]`, "args"},
	} {
		if _, err := profile.Parse(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tr := &profile.Trace{Steps: []profile.Step{
		{Start: 0, Dur: 10 * ms, PrefillTokens: 100, PrefillSeqs: 1, Running: 1, KVUsage: 0.1},                                                        // prefill
		{Start: 10 * ms, Dur: 4 * ms, DecodeTokens: 1, DecodeSeqs: 1, Running: 1, KVUsage: 0.1},                                                       // decode
		{Start: 14 * ms, Dur: 12 * ms, PrefillTokens: 50, CachedTokens: 50, PrefillSeqs: 1, DecodeTokens: 1, DecodeSeqs: 1, Running: 2, KVUsage: 0.3}, // mixed
		{Start: 26 * ms, Dur: 4 * ms, DecodeTokens: 2, DecodeSeqs: 2, Running: 2, Preemptions: 1, KVUsage: 0.3},                                       // decode
	}, Idle: []profile.Span{{Start: 30 * ms, Dur: 10 * ms}}}
	s := profile.Summarize(tr)
	if s.Steps != 4 || s.Busy != 30*ms || s.Span != 30*ms || s.Idle != 10*ms || s.IdleGaps != 1 {
		t.Errorf("times %+v", s)
	}
	if s.DecodeSteps != 2 || s.MixedSteps != 1 || s.PrefillSteps != 1 || s.InterruptionRate != 1.0/3 {
		t.Errorf("kinds: decode %d mixed %d prefill %d rate %g", s.DecodeSteps, s.MixedSteps, s.PrefillSteps, s.InterruptionRate)
	}
	if s.StepP50 != 4*ms || s.StepP99 != 12*ms || s.DecodeStepP50 != 4*ms || s.MixedStepP50 != 12*ms {
		t.Errorf("quantiles p50 %v p99 %v decode %v mixed %v", s.StepP50, s.StepP99, s.DecodeStepP50, s.MixedStepP50)
	}
	if s.BatchMean != 1.5 || s.BatchMax != 2 || s.Preemptions != 1 || s.PrefillTokensPerStep() != 75 || s.CachedShare() != 50.0/200 {
		t.Errorf("batch %g max %d preemptions %d prefill/step %g cached %g", s.BatchMean, s.BatchMax, s.Preemptions, s.PrefillTokensPerStep(), s.CachedShare())
	}
	if s.IdleFraction() != 0.25 || s.MixedShare() != 0.4 {
		t.Errorf("idle %g mixed share %g", s.IdleFraction(), s.MixedShare())
	}
}
