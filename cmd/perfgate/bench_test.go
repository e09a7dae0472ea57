package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/vocab/result"
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
		{[]string{"--target", "http://x", "--num-prompts", "0"}, "--num-prompts: must be at least 1"},
		{[]string{"--target", "http://x", "--dataset", "mooncake", "--dataset-path", "t.jsonl", "--num-prompts", "0"}, "--num-prompts: must be at least 1"},
		{[]string{"--target", "http://x", "--dataset", "mooncake", "--dataset-path", "t.jsonl", "--trace-overlong", "drop"}, "--trace-overlong"},
		{[]string{"--target", "http://x", "--sim-slowdown", "2"}, "--sim-slowdown"},
		{[]string{"--sim", "--sim-slowdown", "0"}, "--sim-slowdown"},
		{[]string{"--target", "http://x", "extra"}, "unexpected arguments"},
		{[]string{"--target", "http://x", "--max-error-rate", "0"}, "--max-error-rate"},
		{[]string{"--target", "http://x", "--backend", "tgi"}, "--backend"},
		{[]string{"--target", "http://x", "--backend", "openai-chat", "--endpoint", "/v1/completions"}, "--backend"},
		{[]string{"--target", "http://x", "--host", "h"}, "--host/--port and --target"},
		{[]string{"--target", "http://x", "--result-dir", "d"}, "add --save-result"},
		{[]string{"--target", "http://x", "--run-id", "a", "--request-id-prefix", "b"}, "same setting"},
		{[]string{"--target", "http://x", "--dataset", "mooncake"}, "--dataset-path"},
		{[]string{"--target", "http://x", "--dataset", "mooncake", "--dataset-path", "t.jsonl", "--request-rate", "4"}, "--trace-time-scale"},
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

// fakeEngine is a small OpenAI-compatible server for the CLI tests: one model,
// "m"; a request for another model gets vLLM's 404; fail, when set, makes
// every other measured request an HTTP 500.
type fakeEngine struct {
	fail atomic.Bool
	n    atomic.Int64
	mu   sync.Mutex
	ids  []string
	srv  *httptest.Server
}

func newEngine(t *testing.T) *fakeEngine {
	e := &fakeEngine{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	gen := func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		id := r.Header.Get("X-Request-Id")
		e.mu.Lock()
		e.ids = append(e.ids, id)
		e.mu.Unlock()
		if b.Model != "m" {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"object":"error","message":"The model `+"`%s`"+` does not exist.","type":"NotFoundError","code":404}`, b.Model)
			return
		}
		if e.fail.Load() && !strings.HasSuffix(id, "-probe") && e.n.Add(1)%2 == 0 {
			http.Error(w, `{"error":{"message":"engine busy"}}`, 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for range b.MaxTokens {
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w \"},\"text\":\"w \"}]}\n\n")
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", b.MaxTokens)
	}
	mux.HandleFunc("POST /v1/chat/completions", gen)
	mux.HandleFunc("POST /v1/completions", gen)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// A `vllm bench serve` command line runs with the program name replaced:
// vLLM's flag names, nargs-style --metadata and --goodput, --save-result
// with vLLM's file name, and --append-result files that compare reads.
func TestBenchVLLMCommandLine(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	vllmLine := []string{"--backend", "openai-chat", "--base-url", e.srv.URL, "--model", "m", "--dataset-name", "random",
		"--random-input-len", "8", "--random-output-len", "4", "--num-prompts", "6", "--max-concurrency", "2",
		"--request-rate", "inf", "--metric-percentiles", "50,99", "--percentile-metrics", "ttft,tpot,itl,e2el",
		"--metadata", "gpu=H100", "tp=1", "--goodput", "ttft:5000", "tpot:500", "--label", "nightly",
		"--request-id-prefix", "bench-abc-", "--num-warmups", "1", "--ignore-eos", "--disable-tqdm", "--seed", "1",
		"--tokenizer", "meta-llama/Llama-3.1-8B-Instruct", "--trust-remote-code", "--save-detailed"}
	code, stdout, stderr := runBenchArgs(t, append(vllmLine, "--save-result", "--result-dir", dir)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "P99 TTFT (ms):") || !strings.Contains(stdout, "Request goodput (req/s):") {
		t.Errorf("summary:\n%s", stdout)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "nightly-infqps-concurrency2-m-*.json"))
	if len(files) != 1 {
		all, _ := os.ReadDir(dir)
		t.Fatalf("want one file named as vLLM names it, got %v", all)
	}
	r, err := result.LoadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if r.EndpointType != "openai-chat" || r.Backend != "openai-chat" || r.Label != "nightly" || r.Perfgate.RunID != "bench-abc" ||
		string(r.Extra["gpu"]) != `"H100"` || r.Perfgate.Metadata["tp"] != "1" || r.Perfgate.Warmup != 1 || r.Completed != 6 {
		t.Errorf("result: endpoint_type %q backend %q label %q run_id %q extra %v section %+v", r.EndpointType, r.Backend, r.Label,
			r.Perfgate.RunID, r.Extra, r.Perfgate)
	}
	if _, ok := r.Metric("p99_itl_ms"); !ok || r.RequestGoodput == nil {
		t.Errorf("metrics %v goodput %v", r.Metrics, r.RequestGoodput)
	}
	found := false
	for _, id := range e.ids {
		found = found || id == "bench-abc-0"
	}
	if !found {
		t.Errorf("no request with X-Request-Id bench-abc-0 among %v", e.ids)
	}

	// --append-result twice: one JSON line each, read back as two runs,
	// and perfgate compare takes the file as a set of runs.
	for range 2 {
		if code, _, stderr := runBenchArgs(t, append(vllmLine, "--append-result", "--result-filename", "runs.jsonl", "--result-dir", dir)...); code != 0 {
			t.Fatalf("append: exit %d: %s", code, stderr)
		}
	}
	appended := filepath.Join(dir, "runs.jsonl")
	rs, err := result.LoadAll(appended)
	if err != nil || len(rs) != 2 {
		t.Fatalf("appended file: %d runs, %v", len(rs), err)
	}
	var out, errb bytes.Buffer
	code = runCompare(context.Background(), &cliEnv{stdout: &out, stderr: &errb, log: zerolog.Nop()},
		[]string{"--baseline", appended, "--candidate", appended, "--tier", "quick"})
	if code == 3 {
		t.Errorf("compare refused the appended file: %s", errb.String())
	}

	// Without --backend or --endpoint, a vLLM line gets vLLM's default
	// backend, openai, on /v1/completions.
	code, _, stderr = runBenchArgs(t, "--base-url", e.srv.URL, "--model", "m", "--random-input-len", "4", "--random-output-len", "2",
		"--num-prompts", "2", "--output", filepath.Join(dir, "c.json"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if r, err := result.LoadFile(filepath.Join(dir, "c.json")); err != nil || r.Backend != "openai" || r.Perfgate.Load.Endpoint != "/v1/completions" {
		t.Errorf("default vLLM backend: %v %+v", err, r)
	}
}

// Wrong --model: the server's own message, the models it serves, exit 1.
func TestBenchWrongModel(t *testing.T) {
	e := newEngine(t)
	code, stdout, stderr := runBenchArgs(t, "--target", e.srv.URL, "--model", "llama", "--num-prompts", "3", "--input-len", "2", "--output-len", "2")
	if code != 1 || !strings.Contains(stderr, "The model `llama` does not exist.") || !strings.Contains(stderr, "pass --model m") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "Serving Benchmark Result") {
		t.Errorf("a run that measured nothing printed a result table:\n%s", stdout)
	}
	if len(e.ids) != 1 {
		t.Errorf("server got %d requests, want the first one only", len(e.ids))
	}
}

// Half the requests fail: the result is written and marked, and the
// command exits 1 naming the commonest error.
func TestBenchErrorRateExit(t *testing.T) {
	e := newEngine(t)
	e.fail.Store(true)
	file := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runBenchArgs(t, "--target", e.srv.URL, "--model", "m", "--num-prompts", "10", "--input-len", "2",
		"--output-len", "2", "--max-concurrency", "1", "--output", file)
	if code != 1 || !strings.Contains(stderr, "5 of 10 requests failed") || !strings.Contains(stderr, "HTTP 500: engine busy") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "this run measured too little to use") {
		t.Errorf("summary lacks the error budget:\n%s", stdout)
	}
	r, err := result.LoadFile(file)
	if err != nil || !r.Perfgate.ErrorRateExceeded || r.Perfgate.MaxErrorRate != 0.05 {
		t.Errorf("result: %v %+v", err, r.Perfgate)
	}
	// A looser budget accepts the same run.
	if code, _, stderr := runBenchArgs(t, "--target", e.srv.URL, "--model", "m", "--num-prompts", "10", "--input-len", "2",
		"--output-len", "2", "--max-concurrency", "1", "--max-error-rate", "0.6"); code != 0 {
		t.Errorf("--max-error-rate 0.6: exit %d, %s", code, stderr)
	}
}

func TestPythonFloat(t *testing.T) {
	for v, want := range map[float64]string{10: "10.0", 2.5: "2.5", 0.25: "0.25"} {
		if got := pythonFloat(v); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if pythonFloat(float64(result.Inf)) != "inf" {
		t.Error("inf")
	}
}
