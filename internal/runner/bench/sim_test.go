package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/sim"
)

// lockedBuffer is a trace sink safe to read after the engine closes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// startSim serves a sim engine over real loopback HTTP; stop closes the
// engine (flushing its trace) and the server.
func startSim(t testing.TB, cfg sim.Config) (url string, stop func()) {
	t.Helper()
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := e.Close(); err != nil {
				t.Errorf("close sim: %v", err)
			}
			srv.Close()
		})
	}
	t.Cleanup(stop)
	return srv.URL, stop
}

func readSimTrace(t testing.TB, data []byte) map[string]sim.TraceRecord {
	t.Helper()
	out := map[string]sim.TraceRecord{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec sim.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		out[rec.RequestID] = rec
	}
	return out
}

func TestRunAgainstSim(t *testing.T) {
	var trace lockedBuffer
	cfg := sim.DefaultConfig()
	cfg.BaseTTFT = time.Millisecond
	cfg.DecodeStep = 200 * time.Microsecond
	cfg.PerSeqCost = 0
	cfg.Trace = &trace
	url, stop := startSim(t, cfg)

	for _, endpoint := range []string{EndpointChat, EndpointCompletions} {
		r, err := Run(context.Background(), Options{Target: url, Endpoint: endpoint, NumPrompts: 40, Warmup: 4, InputLen: 16, OutputLen: 8,
			MaxConcurrency: 8, RunID: "e2e" + strings.ReplaceAll(endpoint, "/", "_")})
		if err != nil {
			t.Fatal(err)
		}
		if r.Completed != 40 || r.Failed != 0 || r.TotalOutputTokens != 320 || r.TotalInputTokens != 640 || r.ModelID != cfg.Model {
			t.Fatalf("%s: completed %d failed %d out %d in %d model %q; errors %v", endpoint, r.Completed, r.Failed,
				r.TotalOutputTokens, r.TotalInputTokens, r.ModelID, r.Perfgate.ErrorCounts)
		}
		if r.Perfgate.TokenSource != "usage" || r.Metrics["median_ttft_ms"] <= 0 || r.Metrics["mean_itl_ms"] <= 0 {
			t.Errorf("%s: from %q, metrics %v", endpoint, r.Perfgate.TokenSource, r.Metrics)
		}
	}
	stop()
	recs := readSimTrace(t, trace.buf.Bytes())
	if len(recs) != 2*45 {
		t.Fatalf("sim traced %d requests, want 90 (2 × (first request + 40 measured + 4 warmup))", len(recs))
	}
	for i := range 40 {
		id := "e2e_v1_chat_completions-" + strconv.Itoa(i)
		rec, ok := recs[id]
		if !ok || rec.Status != 200 || rec.OutputTokens != 8 || rec.PromptTokens != 16 {
			t.Errorf("trace for %s: %+v (found %v)", id, rec, ok)
		}
	}
}

func TestRunAgainstSimFaults(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.BaseTTFT, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillPerToken = 0, 0, 0, 0
	cfg.ErrorRate = 0.3
	url, _ := startSim(t, cfg)
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 60, InputLen: 4, OutputLen: 4,
		Timeout: 10 * time.Second, Seed: 5}) // nothing stalls here: a loaded machine must not time out

	if err != nil {
		t.Fatal(err)
	}
	// About 30% are refused with HTTP 500; the rest complete; the run is
	// over its 5% error budget and says so.
	for msg, n := range r.Perfgate.ErrorCounts {
		if !strings.HasPrefix(msg, "HTTP 500") {
			t.Errorf("unexpected error %q × %d", msg, n)
		}
	}
	if r.Failed < 6 || r.Failed > 30 || r.Completed+r.Failed != 60 || !r.Perfgate.ErrorRateExceeded {
		t.Errorf("failed %d completed %d exceeded %v; errors %v", r.Failed, r.Completed, r.Perfgate.ErrorRateExceeded, r.Perfgate.ErrorCounts)
	}

	// Every stream stalls past the timeout: the first request says so and
	// nothing else is sent.
	cfg.ErrorRate, cfg.StallMS = 0, 2000
	url, _ = startSim(t, cfg)
	_, err = Run(context.Background(), Options{Target: url, NumPrompts: 30, InputLen: 4, OutputLen: 4,
		Timeout: 400 * time.Millisecond, Seed: 5})
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Msg != "stream stalled: no data for 400ms" {
		t.Errorf("Run error = %v, want the first request's stall", err)
	}
}

// End to end against the real sim: prompts built and checked with its
// /tokenize, its /metrics scraped around the measured phase, reasoning
// deltas timed as tokens, and a replayed trace hitting its prefix cache.
func TestRunAgainstSimTokenizeAndMetrics(t *testing.T) {
	cfg := sim.DefaultConfig().Quiet()
	cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillStepOverhead = 2*time.Millisecond, 10*time.Microsecond, time.Millisecond, 0, 0
	cfg.ReasoningTokens = 2
	url, _ := startSim(t, cfg)
	r, err := Run(context.Background(), Options{Target: url, Endpoint: EndpointChat, NumPrompts: 30, Warmup: 3, InputLen: 64, OutputLen: 8, MaxConcurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	sec := r.Perfgate
	if r.Completed != 30 || sec.InputTokenSource != "server_tokenizer" || r.TokenizerID != "server:"+cfg.Model || sec.TokenSource != "usage" {
		t.Fatalf("completed %d, input source %q, tokenizer %q, token source %q; errors %v; warnings %q",
			r.Completed, sec.InputTokenSource, r.TokenizerID, sec.TokenSource, sec.ErrorCounts, sec.Warnings)
	}
	for i, n := range r.InputLens {
		if n != 64 {
			t.Errorf("input_lens[%d] = %d, want 64", i, n)
		}
	}
	sm := sec.ServerMetrics
	if sm == nil || !sm.Available || sm.TTFT == nil || sm.Preemptions == nil {
		t.Fatalf("server metrics %+v", sm)
	}
	// The probe and the warm-up came before the first scrape: the server's
	// histogram grew by exactly the measured requests.
	if sm.TTFT.Count != 30 {
		t.Errorf("server TTFT count %v, want 30", sm.TTFT.Count)
	}
	// The server times from arrival, the client from sending: the client's
	// mean is the larger, by the HTTP path, not by more than itself.
	if g := sm.TTFTGap; g == nil || g.MeanMS < -0.5 || g.MeanMS > r.Metrics["mean_ttft_ms"] {
		t.Errorf("client−server TTFT gap %+v, client mean %v ms, server mean %v ms", sm.TTFTGap, r.Metrics["mean_ttft_ms"], sm.TTFT.MeanMS)
	}
	// The sim streams the first two of the eight tokens as reasoning
	// deltas; they are tokens, so every token is timed.
	for i := range r.ITLs {
		if len(r.ITLs[i]) != 7 {
			t.Errorf("request %d: %d ITLs, want 7 (2 reasoning + 6 content deltas, less the first)", i, len(r.ITLs[i]))
			break
		}
	}

	// A trace whose rows share hash-id prefixes hits the sim's prefix cache.
	r, err = Run(context.Background(), Options{Target: url, Dataset: DatasetMooncake, DatasetPath: mooncakeFixture,
		NumPrompts: 20, TraceTimeScale: 0.05, OutputLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	sm = r.Perfgate.ServerMetrics
	if r.Completed != 20 || sm.PrefixCacheHitRate == nil || *sm.PrefixCacheHitRate < 0.1 {
		t.Errorf("trace replay: completed %d, prefix cache %+v (queries %v hits %v)", r.Completed, sm.PrefixCacheHitRate, sm.PrefixCacheQueries, sm.PrefixCacheHits)
	}
	t.Logf("trace replay: prefix cache hit rate %.2f", *sm.PrefixCacheHitRate)
}

// A second run of the same prompts finds them in the prefix cache unless
// it is salted apart: --cache-salt per run keeps every run as cold as the
// first (the agent salts each measured run with its run id).
func TestCacheSaltKeepsRepeatedRunsCold(t *testing.T) {
	cfg := sim.DefaultConfig().Quiet()
	cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillStepOverhead = time.Millisecond, time.Microsecond, time.Millisecond, 0, 0
	url, _ := startSim(t, cfg)
	hits := func(salt string) float64 {
		t.Helper()
		r, err := Run(context.Background(), Options{Target: url, NumPrompts: 10, InputLen: 64, OutputLen: 2, Seed: 3, CacheSalt: salt})
		if err != nil {
			t.Fatal(err)
		}
		sm := r.Perfgate.ServerMetrics
		if sm == nil || sm.PrefixCacheHits == nil {
			t.Fatalf("no prefix cache counters: %+v", sm)
		}
		return *sm.PrefixCacheHits
	}
	if h := hits("run-1"); h != 0 {
		t.Errorf("first run: %v prefix-cache hit tokens, want 0 (the probe is salted apart)", h)
	}
	if h := hits("run-2"); h != 0 {
		t.Errorf("second run, new salt: %v prefix-cache hit tokens, want 0", h)
	}
	if h := hits("run-2"); h == 0 {
		t.Error("third run, the second's salt: no prefix-cache hits; the test cannot tell salted from cold")
	}
}
