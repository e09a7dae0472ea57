package soak

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Thresholds are a repository's limits on a soak run's trends, per hour.
// A zero limit is not judged (the trend is still reported).
type Thresholds struct {
	// MaxRSSGrowthMBPerHour and MaxGPUMemGrowthMBPerHour: a leak.
	MaxRSSGrowthMBPerHour    float64 `yaml:"max_rss_growth_mb_per_hour" json:"max_rss_growth_mb_per_hour"`
	MaxGPUMemGrowthMBPerHour float64 `yaml:"max_gpu_mem_growth_mb_per_hour" json:"max_gpu_mem_growth_mb_per_hour"`
	// MemoryNoiseMB: a memory trend is a finding only when it also grows
	// this much over the judged part of the run (heap settling, allocator
	// arenas).
	MemoryNoiseMB float64 `yaml:"memory_noise_mb" json:"memory_noise_mb"`
	// MaxHitRateDropPerHour: how far the prefix-cache hit rate may fall
	// per hour (0.05 = 5 points).
	MaxHitRateDropPerHour float64 `yaml:"max_hit_rate_drop_per_hour" json:"max_hit_rate_drop_per_hour"`
	// MaxKVUsageRisePerHour: KV blocks that are never freed fill the cache
	// at a constant load.
	MaxKVUsageRisePerHour float64 `yaml:"max_kv_usage_rise_per_hour" json:"max_kv_usage_rise_per_hour"`
	// MaxLatencyCreepPerHour: relative growth per hour of the median TTFT
	// and TPOT (0.1 = 10% an hour).
	MaxLatencyCreepPerHour float64 `yaml:"max_latency_creep_per_hour" json:"max_latency_creep_per_hour"`
	// WarmupFraction of the run is left out of every fit: caches fill,
	// the heap grows to its working size.
	WarmupFraction float64 `yaml:"warmup_fraction" json:"warmup_fraction"`
	// MinSamples a trend needs after the warm-up to be judged.
	MinSamples int `yaml:"min_samples" json:"min_samples"`
}

// DefaultThresholds are sized for a two-hour nightly run of a server that
// should be flat: 64 MB an hour is a leak of a few KB a request at tens of
// requests a second.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MaxRSSGrowthMBPerHour:    64,
		MaxGPUMemGrowthMBPerHour: 64,
		MemoryNoiseMB:            16,
		MaxHitRateDropPerHour:    0.05,
		MaxKVUsageRisePerHour:    0.10,
		MaxLatencyCreepPerHour:   0.10,
		WarmupFraction:           0.2,
		MinSamples:               8,
	}
}

// Validate says what to fix.
func (t Thresholds) Validate() error {
	var errs []error
	for _, v := range []struct {
		name string
		v    float64
	}{
		{"max_rss_growth_mb_per_hour", t.MaxRSSGrowthMBPerHour}, {"max_gpu_mem_growth_mb_per_hour", t.MaxGPUMemGrowthMBPerHour},
		{"memory_noise_mb", t.MemoryNoiseMB}, {"max_hit_rate_drop_per_hour", t.MaxHitRateDropPerHour},
		{"max_kv_usage_rise_per_hour", t.MaxKVUsageRisePerHour}, {"max_latency_creep_per_hour", t.MaxLatencyCreepPerHour},
	} {
		if v.v < 0 || math.IsNaN(v.v) {
			errs = append(errs, fmt.Errorf("soak %s is %g: must be >= 0 (0 = not judged)", v.name, v.v))
		}
	}
	if t.WarmupFraction < 0 || t.WarmupFraction >= 1 {
		errs = append(errs, fmt.Errorf("soak warmup_fraction is %g: must be in [0, 1)", t.WarmupFraction))
	}
	if t.MinSamples < 2 {
		errs = append(errs, fmt.Errorf("soak min_samples is %d: must be >= 2 (a slope needs two points)", t.MinSamples))
	}
	return errors.Join(errs...)
}

// Status of one trend.
type Status string

const (
	Pass        Status = "pass"
	Fail        Status = "fail"
	NotMeasured Status = "not measured" // too few samples, or the runner could not read it
	NotJudged   Status = "not judged"   // no limit set
)

// Trend is one series' fit and its judgement.
type Trend struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	// PerHour is the Theil–Sen slope per hour, in Unit (relative, for the
	// latencies: 0.1 = +10% an hour); Limit the threshold it is held to,
	// signed the way the trend is bad.
	PerHour float64 `json:"per_hour"`
	Limit   float64 `json:"limit"`
	// Start and End are the fitted line's values at the judged window's
	// ends; Samples how many samples the fit used.
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Samples int     `json:"samples"`
	Status  Status  `json:"status"`
	Why     string  `json:"why"`
}

// Report is a soak run's verdict.
type Report struct {
	DurationS float64 `json:"duration_s"`
	Trends    []Trend `json:"trends"`
	Pass      bool    `json:"pass"`
}

// Failed lists the trends that failed.
func (r Report) Failed() []Trend {
	var out []Trend
	for _, t := range r.Trends {
		if t.Status == Fail {
			out = append(out, t)
		}
	}
	return out
}

// Judge fits every series of samples (in time order) after the warm-up and
// holds it to th.
func Judge(samples []Sample, th Thresholds) Report {
	r := Report{Pass: true}
	if len(samples) > 0 {
		r.DurationS = samples[len(samples)-1].AtS - samples[0].AtS
	}
	from := 0.0
	if len(samples) > 0 {
		from = samples[0].AtS + th.WarmupFraction*r.DurationS
	}
	var window []Sample
	for _, s := range samples {
		if s.AtS >= from {
			window = append(window, s)
		}
	}
	memory := func(s series, limit float64) Trend {
		return judgeRise(window, s, limit, th.MemoryNoiseMB, th.MinSamples)
	}
	r.Trends = []Trend{
		memory(rssSeries, th.MaxRSSGrowthMBPerHour),
		memory(gpuSeries, th.MaxGPUMemGrowthMBPerHour),
		judgeDrop(window, hitSeries, th.MaxHitRateDropPerHour, th.MinSamples),
		judgeRise(window, kvSeries, th.MaxKVUsageRisePerHour, 0, th.MinSamples),
		judgeCreep(window, ttftSeries, th.MaxLatencyCreepPerHour, th.MinSamples),
		judgeCreep(window, tpotSeries, th.MaxLatencyCreepPerHour, th.MinSamples),
		judgeRise(window, preemptRates, 0, 0, th.MinSamples),
	}
	for _, t := range r.Trends {
		if t.Status == Fail {
			r.Pass = false
		}
	}
	return r
}

// fit is a series' Theil–Sen line over window, per hour.
func fit(window []Sample, s series) (t Trend, ok bool) {
	t = Trend{Name: s.name, Unit: s.unit}
	var xs, ys []float64
	for _, w := range window {
		if v := s.value(w); !math.IsNaN(v) {
			xs, ys = append(xs, w.AtS/3600), append(ys, v)
		}
	}
	t.Samples = len(xs)
	if len(xs) < 2 {
		return t, false
	}
	slope, icept := TheilSen(xs, ys)
	if math.IsNaN(slope) {
		return t, false
	}
	t.PerHour = slope
	t.Start, t.End = icept+slope*xs[0], icept+slope*xs[len(xs)-1]
	return t, true
}

// judgeRise fails a series that rises faster than limit per hour and by
// more than noise over the window.
func judgeRise(window []Sample, s series, limit, noise float64, minSamples int) Trend {
	t, ok := fit(window, s)
	t.Limit = limit
	switch {
	case !ok || t.Samples < minSamples:
		t.Status, t.Why = NotMeasured, fmt.Sprintf("%d samples after the warm-up, %d needed", t.Samples, minSamples)
	case limit == 0:
		t.Status, t.Why = NotJudged, fmt.Sprintf("%s%s an hour (no limit set)", signed(t.PerHour), unitText(t.Unit))
	case t.PerHour > limit && t.End-t.Start > noise:
		t.Status = Fail
		t.Why = fmt.Sprintf("grows %s%s an hour (limit %s), %s → %s over the run", signed(t.PerHour), unitText(t.Unit), num(limit), num(t.Start), num(t.End))
	case t.PerHour > limit:
		t.Status = Pass
		t.Why = fmt.Sprintf("%s%s an hour, but only %s over the run (noise floor %s)", signed(t.PerHour), unitText(t.Unit), num(t.End-t.Start), num(noise))
	default:
		t.Status, t.Why = Pass, fmt.Sprintf("%s%s an hour (limit %s)", signed(t.PerHour), unitText(t.Unit), num(limit))
	}
	return t
}

// judgeDrop fails a series that falls faster than limit per hour.
func judgeDrop(window []Sample, s series, limit float64, minSamples int) Trend {
	t, ok := fit(window, s)
	t.Limit = -limit
	switch {
	case !ok || t.Samples < minSamples:
		t.Status, t.Why = NotMeasured, fmt.Sprintf("%d samples after the warm-up, %d needed", t.Samples, minSamples)
	case limit == 0:
		t.Status, t.Why = NotJudged, fmt.Sprintf("%s an hour (no limit set)", signed(t.PerHour))
	case t.PerHour < -limit:
		t.Status = Fail
		t.Why = fmt.Sprintf("falls %s an hour (limit −%s), %s → %s over the run", signed(t.PerHour), num(limit), num(t.Start), num(t.End))
	default:
		t.Status, t.Why = Pass, fmt.Sprintf("%s an hour (limit −%s)", signed(t.PerHour), num(limit))
	}
	return t
}

// judgeCreep fails a latency whose slope, relative to where its line
// starts, exceeds limit per hour.
func judgeCreep(window []Sample, s series, limit float64, minSamples int) Trend {
	t, ok := fit(window, s)
	t.Limit = limit
	if ok && t.Start > 0 {
		t.PerHour /= t.Start
	}
	switch {
	case !ok || t.Samples < minSamples || t.Start <= 0:
		t.Status, t.Why = NotMeasured, fmt.Sprintf("%d samples after the warm-up, %d needed", t.Samples, minSamples)
	case limit == 0:
		t.Status, t.Why = NotJudged, fmt.Sprintf("%s%% an hour (no limit set)", signed(100*t.PerHour))
	case t.PerHour > limit:
		t.Status = Fail
		t.Why = fmt.Sprintf("creeps %s%% an hour (limit %s%%), %s → %s ms over the run", signed(100*t.PerHour), num(100*limit), num(t.Start), num(t.End))
	default:
		t.Status, t.Why = Pass, fmt.Sprintf("%s%% an hour (limit %s%%)", signed(100*t.PerHour), num(100*limit))
	}
	return t
}

// unitText is " MB", or nothing for a unitless series.
func unitText(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

func signed(v float64) string {
	s := num(v)
	if v >= 0 {
		s = "+" + s
	}
	return strings.Replace(s, "-", "−", 1)
}

func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
