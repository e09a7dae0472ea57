package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// vllmMetrics is /metrics as vLLM's Python Prometheus client writes it,
// with the histogram's buckets, count and sum, counters with _total and
// their _created gauges, and two engines for the running gauge.
func vllmMetrics(buckets [5]int, sum float64, preemptions, queries, hits float64) string {
	var b strings.Builder
	b.WriteString("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n")
	b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
	for i, le := range []string{"0.01", "0.02", "0.04", "0.08", "+Inf"} {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"%s\",model_name=\"fake-model\"} %d.0\n", le, buckets[i])
	}
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"fake-model\"} %d.0\n", buckets[4])
	fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"fake-model\"} %g\n", sum)
	fmt.Fprintf(&b, "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n# TYPE vllm:num_preemptions_total counter\n")
	fmt.Fprintf(&b, "vllm:num_preemptions_total{engine=\"0\",model_name=\"fake-model\"} %g\n", preemptions)
	fmt.Fprintf(&b, "# TYPE vllm:num_preemptions_created gauge\nvllm:num_preemptions_created{engine=\"0\",model_name=\"fake-model\"} 1.7e+09\n")
	fmt.Fprintf(&b, "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{engine=\"0\",model_name=\"fake-model\"} %g\n", queries)
	fmt.Fprintf(&b, "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{engine=\"0\",model_name=\"fake-model\"} %g\n", hits)
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	b.WriteString("vllm:num_requests_running{engine=\"0\",model_name=\"fake-model\"} 1.0\nvllm:num_requests_running{engine=\"1\",model_name=\"fake-model\"} 2.0\n")
	b.WriteString("# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"fake-model\"} 0.25\n")
	return b.String()
}

func TestServerMetricsCrossCheck(t *testing.T) {
	var scrapes atomic.Int64
	f := &fakeVLLM{usage: true, metrics: func() string {
		if scrapes.Add(1) == 1 {
			return vllmMetrics([5]int{2, 5, 10, 10, 10}, 0.5, 2, 1000, 100)
		}
		return vllmMetrics([5]int{2, 5, 20, 30, 30}, 1.5, 5, 3000, 1100)
	}}
	url := f.start(t)
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 5, InputLen: 4, OutputLen: 3})
	if err != nil {
		t.Fatal(err)
	}
	sm := r.Perfgate.ServerMetrics
	if sm == nil || !sm.Available || sm.URL != url+"/metrics" {
		t.Fatalf("server metrics %+v", sm)
	}
	h := sm.TTFT
	// 20 new observations: 10 in (0.02, 0.04], 10 in (0.04, 0.08]; sum 1 s.
	if h == nil || h.Count != 20 || !near(h.MeanMS, 50) || !near(h.MedianMS, 40) || !near(h.P99MS, 79.2) || len(h.Buckets) != 4 {
		t.Errorf("TTFT delta %+v", h)
	}
	if *sm.Preemptions != 3 || *sm.PrefixCacheQueries != 2000 || *sm.PrefixCacheHits != 1000 || *sm.PrefixCacheHitRate != 0.5 {
		t.Errorf("preemptions %v queries %v hits %v rate %v", *sm.Preemptions, *sm.PrefixCacheQueries, *sm.PrefixCacheHits, *sm.PrefixCacheHitRate)
	}
	if sm.After[metricRunning] != 3 || sm.After[metricKVUsage] != 0.25 {
		t.Errorf("gauges after %v", sm.After)
	}
	if g := sm.TTFTGap; g == nil || math.Abs(g.MedianMS-(r.Metrics["median_ttft_ms"]-40)) > 1e-9 || math.Abs(g.MeanMS-(r.Metrics["mean_ttft_ms"]-50)) > 1e-9 {
		t.Errorf("gap %+v, client median %v mean %v", sm.TTFTGap, r.Metrics["median_ttft_ms"], r.Metrics["mean_ttft_ms"])
	}
	if len(sm.Found) != 6 {
		t.Errorf("found %v", sm.Found)
	}
}

// No /metrics, or /metrics without vLLM's names, is recorded, not an error.
func TestServerMetricsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		metrics func() string
		want    string
	}{
		{nil, "HTTP 404"},
		{func() string { return "# TYPE up gauge\nup 1\n" }, "no vLLM metrics"},
		{func() string { return "vllm:x{ 1\n" }, "parse"},
	} {
		f := &fakeVLLM{usage: true, metrics: tc.metrics}
		url := f.start(t)
		r, err := Run(context.Background(), Options{Target: url, NumPrompts: 2, InputLen: 4, OutputLen: 3})
		if err != nil {
			t.Fatal(err)
		}
		if sm := r.Perfgate.ServerMetrics; sm.Available || !strings.Contains(sm.Reason, tc.want) {
			t.Errorf("server metrics %+v, want unavailable: %q", sm, tc.want)
		}
	}
}

func TestBucketQuantile(t *testing.T) {
	b := []bucket{{0.1, 0}, {0.2, 4}, {0.4, 4}, {0.8, 8}}
	for _, tc := range []struct{ q, want float64 }{{0.25, 0.15}, {0.5, 0.2}, {0.75, 0.6}, {1, 0.8}} {
		if got := bucketQuantile(tc.q, toBuckets(b), 8); !near(got, tc.want) {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
	// Observations past the last finite bound answer that bound.
	if got := bucketQuantile(0.99, toBuckets(b), 10); got != 0.8 {
		t.Errorf("past the last bucket: %v", got)
	}
}

type bucket struct{ le, count float64 }

func toBuckets(bs []bucket) []result.Bucket {
	out := make([]result.Bucket, len(bs))
	for i, b := range bs {
		out[i] = result.Bucket{LE: b.le, Count: b.count}
	}
	return out
}
