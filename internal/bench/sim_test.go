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

	"github.com/perfgate/perfgate/internal/sim"
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
		Timeout: 150 * time.Millisecond, Seed: 5})
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
	cfg.ErrorRate, cfg.StallMS = 0, 400
	url, _ = startSim(t, cfg)
	_, err = Run(context.Background(), Options{Target: url, NumPrompts: 30, InputLen: 4, OutputLen: 4,
		Timeout: 150 * time.Millisecond, Seed: 5})
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Msg != "stream stalled: no data for 150ms" {
		t.Errorf("Run error = %v, want the first request's stall", err)
	}
}
