package soak

import "math"

// Sample is one moment of a soak run. A value the runner could not read is
// NaN (encoded as null), and its series is then judged on the rest.
type Sample struct {
	AtS float64 `json:"at_s"` // seconds since the run's start
	// Engine process resident memory and the card's used memory, bytes.
	RSSBytes    float64 `json:"rss_bytes"`
	GPUMemBytes float64 `json:"gpu_mem_bytes"`
	// From the server's /metrics: the prefix-cache hit rate over the
	// interval since the previous sample, KV-cache usage (0–1) and the
	// preemptions counter.
	PrefixHitRate float64 `json:"prefix_hit_rate"`
	KVUsage       float64 `json:"kv_usage"`
	Preemptions   float64 `json:"preemptions"`
	// Client latencies of the requests that finished in the interval, ms.
	TTFTp50ms float64 `json:"ttft_p50_ms"`
	TPOTp50ms float64 `json:"tpot_p50_ms"`
	Requests  int     `json:"requests"`
}

// Unknown marks a value the runner could not read.
var Unknown = math.NaN()

// series picks one value out of every sample.
type series struct {
	name  string
	unit  string
	value func(Sample) float64
}

var (
	rssSeries    = series{"rss", "MB", func(s Sample) float64 { return s.RSSBytes / (1 << 20) }}
	gpuSeries    = series{"gpu_memory", "MB", func(s Sample) float64 { return s.GPUMemBytes / (1 << 20) }}
	hitSeries    = series{"prefix_hit_rate", "", func(s Sample) float64 { return s.PrefixHitRate }}
	kvSeries     = series{"kv_usage", "", func(s Sample) float64 { return s.KVUsage }}
	ttftSeries   = series{"ttft_p50", "ms", func(s Sample) float64 { return s.TTFTp50ms }}
	tpotSeries   = series{"tpot_p50", "ms", func(s Sample) float64 { return s.TPOTp50ms }}
	preemptRates = series{"preemptions", "", func(s Sample) float64 { return s.Preemptions }}
)

// Relative reports whether a trend's slope is a fraction of where its
// line starts (the latencies' creep) rather than in its unit.
func Relative(name string) bool { return name == ttftSeries.name || name == tpotSeries.name }
