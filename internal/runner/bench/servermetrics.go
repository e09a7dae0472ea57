package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// vLLM's Prometheus metric names the cross-check reads. Counters appear
// with their _total suffix in the text format.
const (
	metricTTFT          = "vllm:time_to_first_token_seconds"
	metricPreemptions   = "vllm:num_preemptions_total"
	metricPrefixQueries = "vllm:prefix_cache_queries_total"
	metricPrefixHits    = "vllm:prefix_cache_hits_total"
	metricRunning       = "vllm:num_requests_running"
	metricWaiting       = "vllm:num_requests_waiting"
	metricKVUsage       = "vllm:kv_cache_usage_perc"
	metricKVUsageOld    = "vllm:gpu_cache_usage_perc" // before vLLM 0.10
)

// scrape is one reading of an engine's /metrics.
type scrape struct {
	families map[string]*dto.MetricFamily
	err      error
}

// scrapeMetrics reads target's Prometheus /metrics with expfmt's text
// parser. A server without /metrics is normal (not every engine has one):
// the scrape records why and the run goes on.
func scrapeMetrics(ctx context.Context, client *http.Client, url, apiKey string) scrape {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scrape{err: err}
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return scrape{err: fmt.Errorf("GET %s: %s", url, cleanError(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return scrape{err: fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return scrape{err: fmt.Errorf("parse %s as Prometheus text: %w", url, err)}
	}
	return scrape{families: fams}
}

// gaugeNames are the gauges read after the phase and sampled during it.
var gaugeNames = []string{metricRunning, metricWaiting, metricKVUsage, metricKVUsageOld}

// gaugeSampleEvery is how often the gauges are scraped while the measured
// phase runs: often enough for a run of a few seconds, rarely enough that
// parsing vLLM's /metrics (a few ms of CPU) costs the client little.
const gaugeSampleEvery = 250 * time.Millisecond

// gaugeSampler scrapes the engine's gauges while the measured phase runs.
type gaugeSampler struct {
	stop   chan struct{}
	done   chan struct{}
	values map[string][]float64
	n      int
}

// sampleGauges starts scraping url every interval until stopped.
func sampleGauges(ctx context.Context, client *http.Client, url, apiKey string, every time.Duration) *gaugeSampler {
	g := &gaugeSampler{stop: make(chan struct{}), done: make(chan struct{}), values: map[string][]float64{}}
	go func() {
		defer close(g.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			vals, err := scrapeGauges(ctx, client, url, apiKey)
			if err != nil {
				continue
			}
			g.n++
			for name, v := range vals {
				g.values[name] = append(g.values[name], v)
			}
		}
	}()
	return g
}

// finish stops the sampler and returns each gauge's mean, peak and p95
// over the samples, and the number of scrapes.
func (g *gaugeSampler) finish() (map[string]result.Aggregate, int) {
	if g == nil {
		return nil, 0
	}
	close(g.stop)
	<-g.done
	if len(g.values) == 0 {
		return nil, g.n
	}
	out := map[string]result.Aggregate{}
	for name, vs := range g.values {
		sorted := append([]float64(nil), vs...)
		sort.Float64s(sorted)
		out[name] = result.Aggregate{Mean: mean(sorted), Max: sorted[len(sorted)-1], P95: percentile(sorted, 95)}
	}
	return out, g.n
}

// scrapeGauges reads only the gauges of gaugeNames from url, summed over
// their series. It scans the text for their sample lines instead of
// parsing every family: vLLM's /metrics runs to hundreds of kilobytes of
// histograms, and this runs while the measured phase does.
func scrapeGauges(ctx context.Context, client *http.Client, url, apiKey string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 32<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := gaugeSample(sc.Bytes())
		if ok {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// gaugeSample reads a sample line "name{labels} value [timestamp]" of one
// of gaugeNames.
func gaugeSample(line []byte) (string, float64, bool) {
	if len(line) == 0 || line[0] == '#' {
		return "", 0, false
	}
	for _, name := range gaugeNames {
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		rest := line[len(name):]
		switch {
		case len(rest) > 0 && rest[0] == '{':
			end := bytes.LastIndexByte(rest, '}')
			if end < 0 {
				return "", 0, false
			}
			rest = rest[end+1:]
		case len(rest) > 0 && rest[0] == ' ':
		default:
			continue // a longer name with this one as its prefix
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return "", 0, false
		}
		v, err := strconv.ParseFloat(string(f[0]), 64)
		if err != nil || math.IsNaN(v) {
			return "", 0, false
		}
		return name, v, true
	}
	return "", 0, false
}

// serverMetrics compares the scrapes before and after the measured phase.
// clientTTFTs are the successful requests' TTFTs in seconds.
func serverMetrics(url string, before, after scrape, clientTTFTs []float64) *result.ServerMetrics {
	sm := &result.ServerMetrics{URL: url}
	switch {
	case before.err != nil:
		sm.Reason = before.err.Error()
		return sm
	case after.err != nil:
		sm.Reason = after.err.Error()
		return sm
	}
	for _, name := range []string{metricTTFT, metricPreemptions, metricPrefixQueries, metricPrefixHits,
		metricRunning, metricWaiting, metricKVUsage, metricKVUsageOld} {
		if _, ok := after.families[name]; ok {
			sm.Found = append(sm.Found, name)
		}
	}
	if len(sm.Found) == 0 {
		sm.Reason = "no vLLM metrics (vllm:…) at " + url
		return sm
	}
	sm.Available = true

	if h := histogramDelta(before.families[metricTTFT], after.families[metricTTFT]); h != nil {
		sm.TTFT = h
		if h.Count > 0 && len(clientTTFTs) > 0 {
			sorted := append([]float64(nil), clientTTFTs...)
			sort.Float64s(sorted)
			sm.TTFTGap = &result.TTFTGap{
				MedianMS: percentile(sorted, 50)*1000 - h.MedianMS,
				MeanMS:   mean(sorted)*1000 - h.MeanMS,
			}
		}
	}
	delta := func(name string) *float64 {
		a, ok := counterSum(after.families[name])
		if !ok {
			return nil
		}
		b, _ := counterSum(before.families[name])
		d := a - b
		return &d
	}
	sm.Preemptions = delta(metricPreemptions)
	sm.PrefixCacheQueries = delta(metricPrefixQueries)
	sm.PrefixCacheHits = delta(metricPrefixHits)
	if q, h := sm.PrefixCacheQueries, sm.PrefixCacheHits; q != nil && h != nil && *q > 0 {
		r := *h / *q
		sm.PrefixCacheHitRate = &r
	}
	for _, name := range gaugeNames {
		if v, ok := gaugeSum(after.families[name]); ok {
			if sm.After == nil {
				sm.After = map[string]float64{}
			}
			sm.After[name] = v
		}
	}
	return sm
}

// counterSum adds a counter's (or an untyped metric's) series.
func counterSum(mf *dto.MetricFamily) (float64, bool) {
	if mf == nil {
		return 0, false
	}
	s := 0.0
	for _, m := range mf.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			s += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			s += m.GetUntyped().GetValue()
		case m.GetGauge() != nil:
			s += m.GetGauge().GetValue()
		}
	}
	return s, true
}

// gaugeSum adds a gauge's series (one per engine).
func gaugeSum(mf *dto.MetricFamily) (float64, bool) { return counterSum(mf) }

// histogramDelta is after − before of a histogram summed over its series,
// with the median and p99 estimated from the buckets.
func histogramDelta(before, after *dto.MetricFamily) *result.HistogramDelta {
	a := histogramSum(after)
	if a == nil {
		return nil
	}
	b := histogramSum(before)
	d := &result.HistogramDelta{Count: a.count, MeanMS: 0}
	sum := a.sum
	if b != nil {
		d.Count -= b.count
		sum -= b.sum
	}
	for _, le := range a.les {
		c := a.buckets[le]
		if b != nil {
			c -= b.buckets[le]
		}
		if !math.IsInf(le, 1) {
			d.Buckets = append(d.Buckets, result.Bucket{LE: le, Count: c})
		}
	}
	if d.Count > 0 {
		d.MeanMS = sum / d.Count * 1000
		d.MedianMS = bucketQuantile(0.5, d.Buckets, d.Count) * 1000
		d.P99MS = bucketQuantile(0.99, d.Buckets, d.Count) * 1000
	}
	return d
}

type histSum struct {
	count, sum float64
	buckets    map[float64]float64 // cumulative count per upper bound
	les        []float64           // sorted upper bounds
}

func histogramSum(mf *dto.MetricFamily) *histSum {
	if mf == nil {
		return nil
	}
	h := &histSum{buckets: map[float64]float64{}}
	for _, m := range mf.GetMetric() {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		h.count += float64(hm.GetSampleCount())
		h.sum += hm.GetSampleSum()
		for _, bk := range hm.GetBucket() {
			le := bk.GetUpperBound()
			if _, seen := h.buckets[le]; !seen {
				h.les = append(h.les, le)
			}
			h.buckets[le] += float64(bk.GetCumulativeCount())
		}
	}
	sort.Float64s(h.les)
	return h
}

// bucketQuantile estimates the q-quantile from cumulative buckets as
// Prometheus's histogram_quantile does: linear within the bucket that
// holds it, from the previous bound (0 for the first); past the last
// finite bound it answers that bound.
func bucketQuantile(q float64, buckets []result.Bucket, total float64) float64 {
	if total <= 0 || len(buckets) == 0 {
		return 0
	}
	rank := q * total
	prevLE, prevCount := 0.0, 0.0
	for _, b := range buckets {
		if b.Count >= rank {
			if b.Count == prevCount {
				return b.LE
			}
			return prevLE + (b.LE-prevLE)*(rank-prevCount)/(b.Count-prevCount)
		}
		prevLE, prevCount = b.LE, b.Count
	}
	return buckets[len(buckets)-1].LE
}
