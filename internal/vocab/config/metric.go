package config

import (
	"regexp"
	"strconv"
)

// Metric is a gateable metric: its config name, the result key its value
// comes from, and which way it gets worse.
type Metric struct {
	Name string // config name, e.g. "tpot_p99"
	Key  string // result key, e.g. "p99_tpot_ms"
	Unit string
	// Natural is the direction that is worse for this metric.
	Natural Direction
	// Absolute metrics (error_rate) are compared as differences, not
	// ratios: their baseline is often 0.
	Absolute bool
	// Latency metrics: which per-request series and which statistic.
	Series     string  // "ttft", "tpot", "itl", "e2el"; "" for others
	Stat       string  // "mean", "median" or "pN"
	Percentile float64 // 50 for median, N for pN
}

var latencyName = regexp.MustCompile(`^(ttft|tpot|itl|e2el)_(mean|median|p([0-9]{1,2}(\.[0-9]+)?))$`)

var otherMetrics = map[string]Metric{
	"output_throughput":      {Name: "output_throughput", Key: "output_throughput", Unit: "tok/s", Natural: LowerIsWorse},
	"request_throughput":     {Name: "request_throughput", Key: "request_throughput", Unit: "req/s", Natural: LowerIsWorse},
	"total_token_throughput": {Name: "total_token_throughput", Key: "total_token_throughput", Unit: "tok/s", Natural: LowerIsWorse},
	"error_rate":             {Name: "error_rate", Key: "error_rate", Unit: "", Natural: HigherIsWorse, Absolute: true},
	"gpu_mem_used":           {Name: "gpu_mem_used", Key: "gpu_mem_used_mib", Unit: "MiB", Natural: HigherIsWorse},
	"gpu_power":              {Name: "gpu_power", Key: "gpu_power_w", Unit: "W", Natural: HigherIsWorse},
	// The engine's CPU time per output token (the agent measures its
	// process tree): on a CPU runner shared with other work, the engine's
	// cost rather than its neighbours' delays.
	"engine_cpu_per_token": {Name: "engine_cpu_per_token", Key: "engine_cpu_ms_per_token", Unit: "ms/tok", Natural: HigherIsWorse},
}

// SustainableRate is the capacity tier's knee (requests/s), recorded
// each night as the series capacity/sustainable_rate. It is a series, not
// a metric a tier can gate: the capacity check judges it.
const SustainableRate = "sustainable_rate"

// SeriesMetric resolves the metric of a stored series: a config metric,
// or one the long-run tiers record.
func SeriesMetric(name string) (Metric, bool) {
	if name == SustainableRate {
		return Metric{Name: name, Key: name, Unit: "req/s", Natural: LowerIsWorse}, true
	}
	return LookupMetric(name)
}

// LookupMetric resolves a config metric name.
func LookupMetric(name string) (Metric, bool) {
	if m, ok := otherMetrics[name]; ok {
		return m, true
	}
	g := latencyName.FindStringSubmatch(name)
	if g == nil {
		return Metric{}, false
	}
	m := Metric{Name: name, Unit: "ms", Natural: HigherIsWorse, Series: g[1], Stat: g[2]}
	switch g[2] {
	case "mean":
	case "median":
		m.Percentile = 50
	default:
		p, err := strconv.ParseFloat(g[3], 64)
		if err != nil || p <= 0 || p >= 100 {
			return Metric{}, false
		}
		m.Percentile = p
	}
	m.Key = g[2] + "_" + g[1] + "_ms"
	return m, true
}

// knownMetricNames are offered as suggestions for a misspelt metric.
func knownMetricNames() []string {
	names := []string{}
	for n := range otherMetrics {
		names = append(names, n)
	}
	for _, s := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, st := range []string{"mean", "median", "p90", "p95", "p99", "p99.9"} {
			names = append(names, s+"_"+st)
		}
	}
	return names
}
