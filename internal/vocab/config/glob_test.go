package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPathFilterDecide(t *testing.T) {
	t.Parallel()
	f, err := NewPathFilter([]string{"{model,engine}/**", "!model/docs/**", "model/docs/perf.md", "**/*.{cu,cuh}"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		gated   bool
		pattern string
	}{
		{"model/llama.py", true, "{model,engine}/**"},
		{"engine/sched/queue.py", true, "{model,engine}/**"},
		{"model/docs/index.md", false, "!model/docs/**"},
		{"model/docs/perf.md", true, "model/docs/perf.md"}, // re-included: the last match decides
		{"kernels/gemm.cuh", true, "**/*.{cu,cuh}"},
		{"./model/x.py", true, "{model,engine}/**"},
		{"README.md", false, ""},
		{"models/x.py", false, ""},
	}
	for _, tc := range cases {
		gated, pattern := f.Decide(tc.name)
		if gated != tc.gated || pattern != tc.pattern {
			t.Errorf("Decide(%q) = %v by %q, want %v by %q", tc.name, gated, pattern, tc.gated, tc.pattern)
		}
	}
}

// A file name a PR author chooses cannot make matching slow: 101 segments
// against patterns with several "**" (exponential in the old matcher: 31 s).
// The bound is two orders of magnitude above the measured time; the
// benchmark gives the number.
func TestPathologicalPathIsFast(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("a/", 100) + "b"
	f, err := NewPathFilter([]string{"**/a/**/a/**/a/**/a/**/a/**/c", "!**/a/**/a/**/a/**/x"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 100 {
		if f.Gates(name) {
			t.Fatal("matched")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100 matches of a 101-segment path took %v", d)
	}
}

// go test -run XXX -bench PathFilter ./internal/vocab/config
func BenchmarkPathFilterPathological(b *testing.B) {
	name := strings.Repeat("a/", 100) + "b"
	f, err := NewPathFilter([]string{"**/a/**/a/**/a/**/a/**/a/**/c"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f.Gates(name)
	}
}

func TestPathsValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		yaml string
		want string // "" = valid
	}{
		{`paths: ["{model,inference_engine}/**"]`, ""},
		{`paths: ["model/**", "!model/docs/**"]`, ""},
		{`paths: ["!docs/**"]`, "comes before any pattern"},
		{`paths: ["!docs/**", "model/**"]`, "comes before any pattern"},
		{`paths: ["model/***"]`, "whole path segment"},
		{`paths: ["{model,engine/**"]`, "unbalanced"},
		{`paths: ["/model/**"]`, "absolute"},
		{`paths: ["!!model/**"]`, `"!!" is not a pattern`},
		{`paths: ["!"]`, "empty pattern"},
	}
	for _, tc := range cases {
		_, err := Parse(DefaultPath, []byte(tc.yaml))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}

// A YAML alias bomb — one anchored tier with many metrics, referenced by
// thousands of tier names — is refused at the first limit, fast, with one
// error; so is a file that spells out more values than any config has.
func TestAliasBombRefused(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("tiers:\n  quick: &q\n    prompts: 1000\n    metrics:\n")
	for i := range 50 {
		b.WriteString("      ttft_p" + strconv.Itoa(50+i%49) + "_" + strconv.Itoa(i) + ": 5%\n")
	}
	for i := range 5000 {
		b.WriteString("  t" + strconv.Itoa(i) + ": *q\n")
	}
	start := time.Now()
	_, err := Parse(DefaultPath, []byte(b.String()))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) > 60 {
		t.Fatalf("alias bomb: %v, want a short validation error", err)
	}
	if !strings.Contains(err.Error(), "alias expansions") {
		t.Errorf("error does not name the limit: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing the bomb took %v", d)
	}

	var flat strings.Builder
	flat.WriteString("paths:\n")
	for i := range maxValues + 10 {
		flat.WriteString("  - model/" + strconv.Itoa(i) + "/**\n")
	}
	if _, err := Parse(DefaultPath, []byte(flat.String())); err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Errorf("a file of %d values: %v", maxValues+10, err)
	}
	// Honest aliases still work.
	if _, err := Parse(DefaultPath, []byte("workload: &w {input_len: 512}\n")); err != nil {
		t.Errorf("a plain anchor: %v", err)
	}
}
