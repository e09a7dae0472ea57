package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

var update = flag.Bool("update", false, "rewrite golden files")

// vllmFixture is shaped as `vllm bench serve --save-result --save-detailed
// --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99,99.9
// --goodput ttft:250 --metadata gpu=H100-demo --max-concurrency 4` writes
// it (one JSON line, request_rate "inf", metadata as top-level keys); its
// aggregates follow serve.py's calculate_metrics on the per-request arrays.
const vllmFixture = "../../../testdata/vllm/openai-chat-infqps-concurrency4-Llama-3.1-8B-Instruct-20250611-142233.json"

func TestVLLMFixtureParses(t *testing.T) {
	r, err := result.LoadFile(vllmFixture)
	if err != nil {
		t.Fatal(err)
	}
	if r.Backend != "openai-chat" || r.ModelID != "meta-llama/Llama-3.1-8B-Instruct" || r.Date != "20250611-142233" || r.NumPrompts != 4 {
		t.Errorf("setup keys: backend %q model %q date %q num_prompts %d", r.Backend, r.ModelID, r.Date, r.NumPrompts)
	}
	if !r.RequestRate.IsInf() || r.Burstiness != 1 || r.MaxConcurrency == nil || *r.MaxConcurrency != 4 {
		t.Errorf("traffic keys: rate %v burstiness %v max_concurrency %v", r.RequestRate, r.Burstiness, r.MaxConcurrency)
	}
	if r.Completed != 3 || r.Failed != 1 || r.TotalInputTokens != 60 || r.TotalOutputTokens != 8 {
		t.Errorf("counts: %d completed %d failed %d in %d out", r.Completed, r.Failed, r.TotalInputTokens, r.TotalOutputTokens)
	}
	if r.RequestGoodput == nil || *r.RequestGoodput != 4 || r.MaxOutputTokensPerS != 8 || r.MaxConcurrentReqs != 3 {
		t.Errorf("goodput %v peak tok/s %v peak concurrency %v", r.RequestGoodput, r.MaxOutputTokensPerS, r.MaxConcurrentReqs)
	}
	for key, want := range map[string]float64{"p99_ttft_ms": 298, "median_itl_ms": 20, "p99_e2el_ms": 298.8, "p99.9_ttft_ms": 299.8} {
		if got, ok := r.Metric(key); !ok || !near(got, want) {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	for _, k := range []string{"gpu", "label", "endpoint_type", "latencies", "start_times", "generated_texts"} {
		if _, ok := r.Extra[k]; !ok && !(k == "generated_texts" && len(r.GeneratedTexts) > 0) {
			t.Errorf("key %q lost on parse", k)
		}
	}
	if r.Perfgate != nil {
		t.Errorf("a vLLM file has no perfgate section")
	}
}

// Recomputing the fixture's aggregates from its own per-request arrays
// must give back vLLM's numbers: the metric definitions match serve.py.
func TestAggregateMatchesVLLMFixture(t *testing.T) {
	r, err := result.LoadFile(vllmFixture)
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		Latencies  []float64 `json:"latencies"`
		StartTimes []float64 `json:"start_times"`
	}
	raw, _ := os.ReadFile(vllmFixture)
	if err := json.Unmarshal(raw, &extra); err != nil {
		t.Fatal(err)
	}
	recs := make([]record, len(r.TTFTs))
	for i := range recs {
		recs[i] = record{
			ok: r.Errors[i] == "", err: r.Errors[i], promptLen: r.InputLens[i],
			usage: true, usageOut: r.OutputLens[i], chunks: len(r.ITLs[i]) + 1,
			start: time.Unix(0, 0).Add(time.Duration(extra.StartTimes[i] * float64(time.Second))),
			ttft:  r.TTFTs[i], latency: extra.Latencies[i], itl: r.ITLs[i],
		}
	}
	got := aggregate(recs, time.Duration(r.Duration*float64(time.Second)), []float64{50, 99, 99.9}, map[string]float64{"ttft": 250})
	if len(got.Metrics) != len(r.Metrics) {
		t.Errorf("%d metric keys, vLLM file has %d", len(got.Metrics), len(r.Metrics))
	}
	for k, want := range r.Metrics {
		if v, ok := got.Metrics[k]; !ok || !near(v, want) {
			t.Errorf("%s = %v, vLLM %v", k, v, want)
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"request_throughput", got.RequestThroughput, r.RequestThroughput},
		{"output_throughput", got.OutputThroughput, r.OutputThroughput},
		{"total_token_throughput", got.TotalTokenThroughput, r.TotalTokenThroughput},
		{"request_goodput", *got.RequestGoodput, *r.RequestGoodput},
		{"max_output_tokens_per_s", got.MaxOutputTokensPerS, r.MaxOutputTokensPerS},
		{"max_concurrent_requests", got.MaxConcurrentReqs, r.MaxConcurrentReqs},
		{"total_input_tokens", float64(got.TotalInputTokens), float64(r.TotalInputTokens)},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, vLLM %v", c.name, c.got, c.want)
		}
	}
}

func TestWriteSummaryGolden(t *testing.T) {
	vllm, err := result.LoadFile(vllmFixture)
	if err != nil {
		t.Fatal(err)
	}
	withErrors := aggregate(append(handRecords(), record{err: "HTTP 500: boom"}, record{err: "stream stalled: no data for 5s"}),
		time.Second, []float64{50, 99}, nil)
	c := 8
	withErrors.MaxConcurrency = &c
	withErrors.RequestRate = 4
	shaped := aggregate(handRecords(), time.Second, []float64{50, 99}, nil)
	shaped.Perfgate.Traffic = &result.Traffic{
		Sessions:  &result.Sessions{Turns: 5, UserLen: 64, ThinkTimeMS: 1500},
		PromptMix: []result.PromptClass{{Name: "short", InputLen: 128, Weight: 6}, {Name: "long", InputLen: 4096, OutputLen: 256, Weight: 1}},
		Models:    []result.ModelShare{{Name: "llama-8b", Weight: 7}, {Name: "sql-lora", Weight: 3}},
		Counts:    map[string]int{"sessions": 40, "class:short": 34, "class:long": 6, "model:llama-8b": 29, "model:sql-lora": 11},
	}
	for _, tt := range []struct {
		name string
		r    *result.Result
	}{{"summary_vllm.golden", vllm}, {"summary_errors.golden", withErrors}, {"summary_traffic.golden", shaped}} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			WriteSummary(&buf, tt.r)
			golden := filepath.Join("testdata", tt.name)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("summary differs from %s (rerun with -update after checking):\n%s", golden, buf.String())
			}
		})
	}
}
