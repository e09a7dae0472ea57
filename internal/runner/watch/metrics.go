package watch

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serverState is what a soak reads from the engine's /metrics each sample:
// counters (cumulative) and gauges, NaN when the engine does not serve one.
type serverState struct {
	prefixQueries, prefixHits float64
	preemptions               float64
	kvUsage                   float64
	rss                       float64 // process_resident_memory_bytes
}

// metric names in vLLM's spelling; older vLLMs serve the gpu_ ones.
var (
	prefixQueryNames = []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}
	prefixHitNames   = []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}
	preemptNames     = []string{"vllm:num_preemptions_total"}
	kvNames          = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}
	rssNames         = []string{"process_resident_memory_bytes"}
)

func scrapeServer(ctx context.Context, client *http.Client, url string) (serverState, error) {
	nan := serverState{prefixQueries: nan(), prefixHits: nan(), preemptions: nan(), kvUsage: nan(), rss: nan()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nan, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nan, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nan, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nan, fmt.Errorf("scrape %s: %w", url, err)
	}
	return serverState{
		prefixQueries: sum(fams, prefixQueryNames),
		prefixHits:    sum(fams, prefixHitNames),
		preemptions:   sum(fams, preemptNames),
		kvUsage:       sum(fams, kvNames),
		rss:           sum(fams, rssNames),
	}, nil
}

// sum adds the samples of the first family of names that is served (one
// per engine of a data-parallel server), or NaN.
func sum(fams map[string]*dto.MetricFamily, names []string) float64 {
	for _, n := range names {
		f, ok := fams[n]
		if !ok || len(f.Metric) == 0 {
			continue
		}
		total := 0.0
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Untyped != nil:
				total += m.Untyped.GetValue()
			}
		}
		return total
	}
	return nan()
}
