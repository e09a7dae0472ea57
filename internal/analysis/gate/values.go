package gate

import (
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// runValue is one run's value of a metric: the flat aggregate the result
// carries, or, where the file lacks that key, the statistic computed from
// the per-request series.
func runValue(r *result.Result, m config.Metric, series *seriesCache) (float64, bool) {
	switch m.Key {
	case "output_throughput":
		return r.OutputThroughput, r.OutputThroughput > 0
	case "request_throughput":
		return r.RequestThroughput, r.RequestThroughput > 0
	case "total_token_throughput":
		return r.TotalTokenThroughput, r.TotalTokenThroughput > 0
	case "error_rate":
		if r.Perfgate != nil {
			return r.Perfgate.ErrorRate, true
		}
		if n := r.Completed + r.Failed; n > 0 {
			return float64(r.Failed) / float64(n), true
		}
		return 0, false
	case "gpu_mem_used_mib":
		return gpuSeries(r, "mem_used_mib", func(a result.Aggregate) float64 { return a.Max })
	case "gpu_power_w":
		return gpuSeries(r, "power_w", func(a result.Aggregate) float64 { return a.Mean })
	case "engine_cpu_ms_per_token":
		if r.Perfgate == nil || r.Perfgate.EngineCPUSeconds <= 0 || r.TotalOutputTokens <= 0 {
			return 0, false
		}
		return 1000 * r.Perfgate.EngineCPUSeconds / float64(r.TotalOutputTokens), true
	}
	if v, ok := r.Metric(m.Key); ok {
		return v, true
	}
	s := series.get(r, m.Series)
	if len(s) == 0 {
		return 0, false
	}
	if m.Stat == "mean" {
		return stats.Mean(s), true
	}
	return stats.Quantile(s, m.Percentile/100), true
}

// gpuSeries reads peak memory (what can run out) or mean power (what the
// run spent) from the run's NVML telemetry.
func gpuSeries(r *result.Result, name string, pick func(result.Aggregate) float64) (float64, bool) {
	if r.Perfgate == nil || r.Perfgate.GPU == nil || !r.Perfgate.GPU.Available {
		return 0, false
	}
	a, ok := r.Perfgate.GPU.Series[name]
	if !ok {
		return 0, false
	}
	v := pick(a)
	return v, v > 0
}

// seriesCache holds each run's sorted per-request series in ms, built once
// per Compare: ttft_p99 and ttft_median share one sort.
type seriesCache struct {
	m map[seriesKey][]float64
}

type seriesKey struct {
	r    *result.Result
	name string
}

func newSeriesCache() *seriesCache { return &seriesCache{m: map[seriesKey][]float64{}} }

func (c *seriesCache) get(r *result.Result, name string) []float64 {
	k := seriesKey{r, name}
	if s, ok := c.m[k]; ok {
		return s
	}
	s := requestSeries(r, name)
	sort.Float64s(s)
	c.m[k] = s
	return s
}

// requestSeries is one run's per-request latencies in ms over the requests
// that succeeded. A plain vLLM file has no per-request TPOT or E2EL; they
// follow from its ttfts and itls the way vLLM computes them.
func requestSeries(r *result.Result, name string) []float64 {
	ok := func(i int) bool { return len(r.Errors) <= i || r.Errors[i] == "" }
	var out []float64
	switch name {
	case "ttft":
		for i, v := range r.TTFTs {
			if ok(i) && v > 0 {
				out = append(out, v*1000)
			}
		}
	case "itl":
		for i, gaps := range r.ITLs {
			if ok(i) {
				for _, g := range gaps {
					out = append(out, g*1000)
				}
			}
		}
	case "tpot":
		if r.Perfgate != nil && len(r.Perfgate.TPOTs) > 0 {
			for i, v := range r.Perfgate.TPOTs {
				if ok(i) && v > 0 {
					out = append(out, v)
				}
			}
			break
		}
		for i, gaps := range r.ITLs {
			if ok(i) && len(gaps) > 0 {
				out = append(out, sum(gaps)*1000/float64(len(gaps)))
			}
		}
	case "e2el":
		if r.Perfgate != nil && len(r.Perfgate.E2ELs) > 0 {
			for i, v := range r.Perfgate.E2ELs {
				if ok(i) && v > 0 {
					out = append(out, v)
				}
			}
			break
		}
		for i, t := range r.TTFTs {
			if ok(i) && t > 0 {
				e := t
				if i < len(r.ITLs) {
					e += sum(r.ITLs[i])
				}
				out = append(out, e*1000)
			}
		}
	}
	return out
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// transform maps a metric value into the space the test works in: log for
// ratios, identity for absolute metrics.
func transform(m config.Metric, v float64) float64 {
	if m.Absolute {
		return v
	}
	return math.Log(v)
}

// MedianOf is the median over runs of one config metric (e.g. "tpot_p99"),
// the value a report shows; false when the metric is unknown or missing.
func MedianOf(runs []*result.Result, metric string) (float64, bool) {
	m, ok := config.LookupMetric(metric)
	if !ok {
		return 0, false
	}
	cache := newSeriesCache()
	var vs []float64
	for _, r := range runs {
		v, ok := runValue(r, m, cache)
		if !ok {
			return 0, false
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return 0, false
	}
	return stats.Median(vs), true
}
