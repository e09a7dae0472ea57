package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// fakeOllama serves Ollama's native /api/generate: each answer is n
// token lines, stamped 1 ms apart by the "engine" (created_at), and a
// done line with the engine's clock (the durations below, in ns), written
// in one piece, so the tokens reach the client in one read. Requests whose id ends in a key of special get that body
// instead.
func fakeOllama(t *testing.T, n int, special map[string]string) (*httptest.Server, func() []map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var bodies []map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"perfgate-tiny:latest","object":"model"}]}`)
	})
	mux.HandleFunc("POST "+EndpointOllama, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		for suffix, b := range special {
			if strings.HasSuffix(r.Header.Get("X-Request-Id"), suffix) {
				io.WriteString(w, b)
				return
			}
		}
		var sb strings.Builder
		for i := range n {
			fmt.Fprintf(&sb, `{"model":"perfgate-tiny:latest","created_at":"2026-12-07T10:00:00.%03dZ","response":"t%d ","done":false}`+"\n", i, i)
		}
		fmt.Fprintf(&sb, `{"model":"perfgate-tiny:latest","created_at":"2026-12-07T10:00:00Z","response":"","done":true,"done_reason":"length","total_duration":%d,"load_duration":%d,"prompt_eval_count":45,"prompt_eval_duration":%d,"eval_count":%d,"eval_duration":%d}`+"\n",
			fakeTotal, fakeLoad, fakePrompt, n, fakeEval)
		io.WriteString(w, sb.String())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), bodies...)
	}
}

const (
	fakeLoad   = 1_500_000  // ns
	fakePrompt = 12_000_000 // ns
	fakeEval   = 31_000_000 // ns: 31 decode steps of 1 ms after the first token
	fakeTotal  = 46_000_000 // ns: 1.5 ms outside load, prompt and eval
	fakeTokens = 32
)

// perfgate bench on Ollama's native API: the request carries num_predict
// and the temperature in options and no raw flag (the model's template
// applies, as on /v1/completions); eval_count is the output length; the
// engine's clock of each request stands beside the client's (Ollama's
// eval_duration / eval_count, and per decode step); and an answer that
// arrives in one piece is marked delivery-bound.
func TestNativeOllamaEngineClock(t *testing.T) {
	t.Parallel()
	srv, bodies := fakeOllama(t, fakeTokens, nil)
	r, err := Run(context.Background(), Options{Target: srv.URL, Backend: "ollama", Model: "perfgate-tiny:latest",
		NumPrompts: 6, InputLen: 8, OutputLen: fakeTokens, MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies() {
		opts, _ := b["options"].(map[string]any)
		if b["model"] != "perfgate-tiny:latest" || b["stream"] != true || b["prompt"] == "" || b["raw"] != nil ||
			opts["temperature"] != 0.0 || (opts["num_predict"] != float64(fakeTokens) && opts["num_predict"] != 16.0) {
			t.Errorf("request body %v", b)
		}
	}
	if r.Completed != 6 || r.TotalOutputTokens != 6*fakeTokens || r.Perfgate.TokenSource != tokenSourceUsage || r.EndpointType != "ollama" {
		t.Fatalf("completed %d, output tokens %d (%s), backend %q; errors %q", r.Completed, r.TotalOutputTokens, r.Perfgate.TokenSource, r.EndpointType, r.Errors)
	}
	e := r.Perfgate.EngineClock
	if e == nil {
		t.Fatal("no engine clock on a native run")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }
	if e.Engine != "ollama" || e.Requests != 6 || e.OutputTokens != fakeTokens ||
		!near(e.EngineTPOTMS, fakeEval/1e6/fakeTokens) || !near(e.EngineStepMS, fakeEval/1e6/(fakeTokens-1)) ||
		!near(e.EngineTTFTMS, (fakeLoad+fakePrompt)/1e6) || !near(e.EngineWaitMS, (fakeTotal-fakeLoad-fakePrompt-fakeEval)/1e6) {
		t.Errorf("engine clock %+v", e)
	}
	if med, _ := r.Metric("median_tpot_ms"); !near(e.ClientTPOTMS, med) || !near(e.TPOTGap, e.ClientTPOTMS/e.EngineTPOTMS-1) || !near(e.StepGap, e.ClientTPOTMS/e.EngineStepMS-1) {
		t.Errorf("client TPOT %g (run's median %g), gaps %g / %g", e.ClientTPOTMS, med, e.TPOTGap, e.StepGap)
	}
	d := r.Perfgate.Client.Delivery
	if d == nil || !d.DeliveryBound || d.Gaps != 6*(fakeTokens-1) || d.EngineGaps != 6*(fakeTokens-1) || d.EngineBurstShare != 0 ||
		!strings.Contains(d.Reason, "the engine's own stamps put 0% of its gaps under 0.1 ms, so most bursts formed after the engine") {
		t.Errorf("a stream stamped 1 ms apart, written in one piece: delivery %+v, want delivery-bound over %d gaps, formed after the engine", d, 6*(fakeTokens-1))
	}
	var sb strings.Builder
	WriteSummary(&sb, r)
	for _, want := range []string{"Client vs the engine's clock", "TPOT client / engine eval/count (ms):", "TPOT/ITL delivery-bound:", "of 186 inter-token gaps under 0.1 ms (median ITL 0.000 ms)"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sb.String())
		}
	}
}

// The native API's failures: an error line mid-stream keeps the engine's
// words, and Ollama's repeat limit (recorded: 31 tokens, then a last line
// "done": false with no counts) is the engine ending the stream early.
func TestNativeOllamaEngineFailures(t *testing.T) {
	t.Parallel()
	recorded, err := os.ReadFile("testdata/ollama-0.9.6-repeat-limit-native.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := fakeOllama(t, 8, map[string]string{
		"-2": string(recorded),
		"-4": `{"response":"a","done":false}` + "\n" + `{"error":"model runner has unexpectedly stopped"}` + "\n",
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointOllama, Model: "perfgate-tiny:latest",
		NumPrompts: 6, InputLen: 2, OutputLen: 8, MaxErrorRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(r.Perfgate.EngineFailures)
	if len(r.Perfgate.EngineFailures) != 2 || r.Perfgate.EngineFailures[0].Prompt != 2 || r.Perfgate.EngineFailures[0].Tokens != 31 ||
		r.Perfgate.EngineFailures[1].Prompt != 4 || r.Perfgate.EngineFailures[1].Words != "model runner has unexpectedly stopped" {
		t.Errorf("engine failures %s; errors %q", got, r.Errors)
	}
	if r.Completed != 4 || r.Perfgate.EngineClock == nil || r.Perfgate.EngineClock.Requests != 4 {
		t.Errorf("completed %d, engine clock %+v", r.Completed, r.Perfgate.EngineClock)
	}
}

// --backend ollama speaks only the native endpoint, and the native
// endpoint takes no conversation.
func TestNativeOllamaOptions(t *testing.T) {
	t.Parallel()
	o := Options{Backend: "ollama", Endpoint: EndpointCompletions}
	if err := o.normalizeEndpoint(); err == nil || !strings.Contains(err.Error(), "ollama speaks /api/generate") {
		t.Errorf("ollama on /v1/completions: %v", err)
	}
	o = Options{Endpoint: EndpointOllama}
	if err := o.normalizeEndpoint(); err != nil || o.Backend != "ollama" {
		t.Errorf("native endpoint alone: backend %q, %v", o.Backend, err)
	}
	q := &requester{native: true, model: "m"}
	if _, err := q.body(request{messages: []chatMessage{{Role: "user", Content: "hi"}}}); err == nil {
		t.Error("a conversation encoded for /api/generate")
	}
}
