package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// Three successful requests and one failure, timings chosen so every
// number can be checked by hand.
func handRecords() []record {
	t0 := time.Unix(1000, 0)
	return []record{
		{ok: true, promptLen: 10, usage: true, usageOut: 3, chunks: 3, start: t0,
			ttft: 0.1, latency: 0.15, itl: []float64{0.02, 0.03}},
		{ok: true, promptLen: 20, chunks: 4, start: t0.Add(50 * time.Millisecond),
			ttft: 0.2, latency: 0.24, itl: []float64{0.01, 0.01, 0.02}},
		{ok: true, promptLen: 30, usage: true, usageOut: 1, chunks: 1, start: t0.Add(100 * time.Millisecond),
			ttft: 0.3, latency: 0.3},
		{ok: false, promptLen: 40, err: "HTTP 500: boom", start: t0.Add(120 * time.Millisecond)},
	}
}

func TestAggregateHandComputed(t *testing.T) {
	r := aggregate(handRecords(), 500*time.Millisecond, []float64{50, 99}, map[string]float64{"ttft": 250})

	ints := []struct {
		name      string
		got, want int
	}{
		{"completed", r.Completed, 3},
		{"failed", r.Failed, 1},
		{"total_input_tokens (successful only)", r.TotalInputTokens, 60},
		{"total_output_tokens", r.TotalOutputTokens, 8},
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	floats := []struct {
		name      string
		got, want float64
	}{
		{"duration", r.Duration, 0.5},
		{"request_throughput", r.RequestThroughput, 6},
		{"output_throughput", r.OutputThroughput, 16},
		{"total_token_throughput", r.TotalTokenThroughput, 136},
		{"request_goodput (ttft ≤ 250 ms: 2 requests)", *r.RequestGoodput, 4},
		{"max_output_tokens_per_s (all 8 chunks in second 0)", r.MaxOutputTokensPerS, 8},
		{"max_concurrent_requests", r.MaxConcurrentReqs, 3},
		{"mean_ttft_ms", r.Metrics["mean_ttft_ms"], 200},
		{"median_ttft_ms", r.Metrics["median_ttft_ms"], 200},
		{"std_ttft_ms (population)", r.Metrics["std_ttft_ms"], 100 * math.Sqrt(2.0/3)},
		{"p99_ttft_ms (numpy linear)", r.Metrics["p99_ttft_ms"], 298},
		// TPOT = (latency-ttft)/(out-1): 0.05/2 and 0.04/3; the 1-token request has none.
		{"mean_tpot_ms", r.Metrics["mean_tpot_ms"], (25 + 40.0/3) / 2},
		{"p99_tpot_ms", r.Metrics["p99_tpot_ms"], 40.0/3 + 0.99*(25-40.0/3)},
		// ITL pools all five gaps.
		{"mean_itl_ms", r.Metrics["mean_itl_ms"], 18},
		{"median_itl_ms", r.Metrics["median_itl_ms"], 20},
		{"std_itl_ms", r.Metrics["std_itl_ms"], 1000 * math.Sqrt(56e-6)},
		{"p99_itl_ms", r.Metrics["p99_itl_ms"], 29.6},
		{"mean_e2el_ms", r.Metrics["mean_e2el_ms"], 230},
		{"p50_e2el_ms", r.Metrics["p50_e2el_ms"], 240},
		{"p99_e2el_ms", r.Metrics["p99_e2el_ms"], 298.8},
		{"error rate", r.Perfgate.ErrorRate, 0.25},
	}
	for _, c := range floats {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	if got := r.OutputLens; len(got) != 4 || got[0] != 3 || got[1] != 4 || got[2] != 1 || got[3] != 0 {
		t.Errorf("output_lens = %v, want [3 4 1 0] (usage where sent, else chunks; 0 for failed)", got)
	}
	if got := r.InputLens; got[3] != 40 {
		t.Errorf("input_lens keeps failed requests' prompt length, got %v", got)
	}
	if r.Errors[3] != "HTTP 500: boom" || r.Errors[0] != "" {
		t.Errorf("errors = %q", r.Errors)
	}
	if r.Perfgate.ErrorCounts["HTTP 500: boom"] != 1 || len(r.Perfgate.ErrorCounts) != 1 {
		t.Errorf("error counts = %v", r.Perfgate.ErrorCounts)
	}
	if source, warn, err := countOutputs(context.Background(), handRecords(), promptTokens{}, true); source != tokenSourceMixed ||
		!strings.Contains(warn, "1 request(s) had no usage block and the server has no /tokenize") || err != nil {
		t.Errorf("token source %q, warning %q, %v; want mixed and a warning about the chunk-counted request", source, warn, err)
	}
	if !near(r.Perfgate.TPOTs[0], 25) || r.Perfgate.TPOTs[2] != 0 || !near(r.Perfgate.E2ELs[1], 240) || r.Perfgate.E2ELs[3] != 0 {
		t.Errorf("per-request tpots %v e2els %v", r.Perfgate.TPOTs, r.Perfgate.E2ELs)
	}
	if len(r.ITLs[3]) != 0 || r.ITLs[3] == nil {
		t.Errorf("failed request's itls = %#v, want an empty list (vLLM writes [])", r.ITLs[3])
	}
}

func TestAggregateEdgeCases(t *testing.T) {
	t.Run("no goodput config writes null", func(t *testing.T) {
		if r := aggregate(handRecords(), time.Second, nil, nil); r.RequestGoodput != nil {
			t.Errorf("request_goodput = %v, want nil", *r.RequestGoodput)
		}
	})
	t.Run("tpot goodput treats 1-token requests as 0", func(t *testing.T) {
		r := aggregate(handRecords(), time.Second, nil, map[string]float64{"tpot": 20})
		// tpots: 25 ms (bad), 13.3 ms (good), 0 (good).
		if *r.RequestGoodput != 2 {
			t.Errorf("goodput = %v, want 2", *r.RequestGoodput)
		}
	})
	t.Run("all failed gives zeros, not NaN", func(t *testing.T) {
		r := aggregate([]record{{err: "x"}, {err: "x"}}, time.Second, []float64{99}, nil)
		for k, v := range r.Metrics {
			if v != 0 {
				t.Errorf("%s = %v, want 0", k, v)
			}
		}
		if r.Perfgate.ErrorCounts["x"] != 2 || r.Perfgate.ErrorRate != 1 {
			t.Errorf("counts %v rate %v", r.Perfgate.ErrorCounts, r.Perfgate.ErrorRate)
		}
	})
	t.Run("percentile keys spelled as vLLM", func(t *testing.T) {
		r := aggregate(handRecords(), time.Second, []float64{99.9, 50}, nil)
		for _, k := range []string{"p99.9_ttft_ms", "p50_itl_ms", "p99.9_e2el_ms", "std_tpot_ms"} {
			if _, ok := r.Metrics[k]; !ok {
				t.Errorf("missing key %s", k)
			}
		}
	})
}

func TestPeaksBuckets(t *testing.T) {
	t0 := time.Unix(0, 0)
	recs := []record{
		// chunks at 0.5, 1.2, 1.4, 1.9 s: bucket 1 holds three.
		{ok: true, start: t0, ttft: 0.5, latency: 1.9, itl: []float64{0.7, 0.2, 0.5}},
		// starts as the first ends: half-open intervals do not overlap.
		{ok: true, start: t0.Add(1900 * time.Millisecond), ttft: 0.15, latency: 0.2}, // chunk at 2.05 s
	}
	tok, conc := peaks(recs)
	if tok != 3 || conc != 1 {
		t.Errorf("peaks = %v tok/s, %v concurrent; want 3, 1", tok, conc)
	}
}
