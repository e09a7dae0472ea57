package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/result"
)

func runBenchArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runBench(context.Background(), &cliEnv{stdout: &out, stderr: &errb, log: zerolog.Nop()}, args)
	return code, out.String(), errb.String()
}

func TestBenchSimWritesSummaryAndResult(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runBenchArgs(t, "--sim", "--num-prompts", "12", "--input-len", "8", "--output-len", "6",
		"--metadata", "pr=7", "--metadata", "note=a b", "--goodput", "ttft:60000", "--percentiles", "50,99.9", "--output", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	for _, want := range []string{"============ Serving Benchmark Result ============", "Successful requests:                     12",
		"Maximum request concurrency:             32", "Request goodput (req/s):", "P99.9 TTFT (ms):"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	r, err := result.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 12 || r.TotalOutputTokens != 72 || !r.Perfgate.Environment.Sim || r.Perfgate.Metadata["note"] != "a b" ||
		r.RequestGoodput == nil || r.Perfgate.Load.MaxConcurrency != 32 {
		t.Errorf("result file: completed %d out %d section %+v", r.Completed, r.TotalOutputTokens, r.Perfgate)
	}
	if _, ok := r.Metric("p99.9_e2el_ms"); !ok {
		t.Errorf("no p99.9_e2el_ms in %v", r.Metrics)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--target"},
		{[]string{"--target", "http://x", "--sim"}, "--sim"},
		{[]string{"--target", "http://x", "--request-rate", "fast"}, "--request-rate"},
		{[]string{"--target", "http://x", "--goodput", "ttft=5"}, "--goodput"},
		{[]string{"--target", "http://x", "--percentiles", "50,200"}, "--percentiles"},
		{[]string{"--target", "http://x", "--metadata", "novalue"}, "-metadata"},
		{[]string{"--target", "http://x", "--endpoint", "/v1/embeddings"}, "--endpoint"},
		{[]string{"--target", "http://x", "--dataset", "sharegpt"}, "--dataset-path"},
		{[]string{"--target", "http://x", "--num-prompts", "-3"}, "--num-prompts"},
		{[]string{"--target", "http://x", "--sim-slowdown", "2"}, "--sim-slowdown"},
		{[]string{"--sim", "--sim-slowdown", "0"}, "--sim-slowdown"},
		{[]string{"--target", "http://x", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		code, _, stderr := runBenchArgs(t, tt.args...)
		if code != 3 || !strings.Contains(stderr, tt.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want exit 3 naming %s", tt.args, code, stderr, tt.want)
		}
	}
}

func TestBenchTargetDown(t *testing.T) {
	code, _, stderr := runBenchArgs(t, "--target", "http://127.0.0.1:1", "--num-prompts", "2")
	if code != 1 || !strings.Contains(stderr, "never answered") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
