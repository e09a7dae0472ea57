package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The engine's gauges are sampled while the measured phase runs: read
// only after it, when the queue has drained, they say nothing (zero
// requests running); sampled during it they show the load the engine
// carried.
func TestGaugesSampledDuringTheRun(t *testing.T) {
	t.Parallel()
	// The measured requests stay in the engine's batch until a scrape has
	// seen them there: the sampler's first tick during the run, however
	// late a loaded machine makes it (the probe, before the sampler
	// starts, is answered at once).
	var running, calls atomic.Int64
	seen := make(chan struct{})
	var seenOnce sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	mux.HandleFunc("POST "+EndpointCompletions, func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		if calls.Add(1) > 1 {
			select {
			case <-seen:
			case <-time.After(time.Minute): // a hang guard: without sampling, the check below fails
			case <-r.Context().Done():
				return
			}
		}
		streamTokens(w, false, 2, true, 2)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		n := running.Load()
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} %d\n", n)
		if n > 0 {
			defer seenOnce.Do(func() { close(seen) })
		}
		io.WriteString(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\"} 0\n")
		// Both names of the KV cache gauge, as some servers serve them.
		io.WriteString(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n")
		io.WriteString(w, "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.5\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
		NumPrompts: 8, InputLen: 2, OutputLen: 2, MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	sm := r.Perfgate.ServerMetrics
	if !sm.Available || sm.After["vllm:num_requests_running"] != 0 {
		t.Fatalf("server metrics %+v: want the after-scrape to read 0 running", sm)
	}
	run := sm.During["vllm:num_requests_running"]
	if sm.Samples < 1 || run.Max < 1 || run.Max > 4 {
		t.Errorf("%d samples, running during the run %+v: want a peak of 1 to 4", sm.Samples, run)
	}
	var sum strings.Builder
	WriteSummary(&sum, r)
	if !strings.Contains(sum.String(), "Running requests mean / peak:") || strings.Count(sum.String(), "KV cache usage mean / peak:") != 1 {
		t.Errorf("summary lacks the sampled gauges:\n%s", sum.String())
	}
}

// The light scan reads what Prometheus's parser reads for the gauges.
func TestGaugeSampleAgreesWithParser(t *testing.T) {
	t.Parallel()
	text := vllmMetrics([5]int{1, 2, 3, 4, 5}, 0.1, 0, 0, 0) +
		"vllm:num_requests_waiting{engine=\"0\",model_name=\"a } b\"} 3 1700000000000\n" +
		"vllm:num_requests_running_total 99\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, text) }))
	t.Cleanup(srv.Close)
	got, err := scrapeGauges(context.Background(), http.DefaultClient, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	sc := scrapeMetrics(context.Background(), http.DefaultClient, srv.URL, "")
	if sc.err != nil {
		t.Fatal(sc.err)
	}
	for _, name := range gaugeNames {
		want, ok := gaugeSum(sc.families[name])
		if g, found := got[name]; found != ok || g != want {
			t.Errorf("%s: scan %v (%v), parser %v (%v)", name, g, found, want, ok)
		}
	}
}
