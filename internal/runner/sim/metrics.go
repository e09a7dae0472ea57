package sim

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bucket bounds as vLLM's PrometheusStatLogger declares them, so a client's
// quantile estimates from the sim's histograms match what it would compute
// against vLLM.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tokenLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
)

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, … up to max.
func buckets125(max int) []float64 {
	var out []float64
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p > max {
				return out
			}
			out = append(out, float64(m*p))
		}
	}
}

// histogram is a fixed-bucket histogram owned by engineStats (its lock
// guards it). The scheduler observes one value per token, so it is kept
// cheaper than a prometheus.Histogram: no atomics, and the bucket of the
// last value is reused, since a batch's tokens share one gap.
type histogram struct {
	bounds  []float64
	counts  []uint64 // per bucket; the last is +Inf
	sum     float64
	count   uint64
	lastV   float64
	lastIdx int
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1), lastV: -1}
}

func (h *histogram) observe(v float64) {
	i := h.lastIdx
	if v != h.lastV {
		i = sort.SearchFloat64s(h.bounds, v) // first bound >= v: Prometheus "le"
		h.lastV, h.lastIdx = v, i
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

func (h *histogram) metric(d *prometheus.Desc, labels []string) prometheus.Metric {
	cum := make(map[float64]uint64, len(h.bounds))
	var c uint64
	for i, b := range h.bounds {
		c += h.counts[i]
		cum[b] = c
	}
	return prometheus.MustNewConstHistogram(d, h.count, h.sum, cum, labels...)
}

// engineStats is the scheduler's truth in vLLM's metric names, served by
// GET /metrics. The scheduler updates it once per step under mu; Collect
// reads it under mu.
type engineStats struct {
	mu     sync.Mutex
	labels []string // model_name, engine

	running, waiting int
	kvUsage          float64
	speed            float64 // noise multiplier of the last step
	throttled        bool

	preemptions, promptTokens, generationTokens uint64
	prefixQueries, prefixHits                   uint64
	success                                     map[string]uint64

	ttft, itl, requestTPOT, e2e, queue, inference, prefill, decode *histogram
	promptLen, genLen, maxTokens, iterTokens                       *histogram

	iterTokensNow int // tokens of the step being applied

	cacheInfo []string // cache_config_info label values

	leaked func() int64 // bytes of the planted leak (leak.go)
}

var finishReasons = []string{finishAbort, finishLength, finishStop}

func newEngineStats(cfg Config) *engineStats {
	lens := buckets125(cfg.MaxModelLen)
	caching := "False"
	if cfg.PrefixCaching {
		caching = "True"
	}
	return &engineStats{
		labels:      []string{cfg.Model, "0"},
		speed:       1,
		success:     map[string]uint64{},
		ttft:        newHistogram(ttftBuckets),
		itl:         newHistogram(tokenLatencyBuckets),
		requestTPOT: newHistogram(tokenLatencyBuckets),
		e2e:         newHistogram(requestLatencyBuckets),
		queue:       newHistogram(requestLatencyBuckets),
		inference:   newHistogram(requestLatencyBuckets),
		prefill:     newHistogram(requestLatencyBuckets),
		decode:      newHistogram(requestLatencyBuckets),
		promptLen:   newHistogram(lens),
		genLen:      newHistogram(lens),
		maxTokens:   newHistogram(lens),
		iterTokens:  newHistogram(iterationTokenBuckets),
		cacheInfo: []string{strconv.Itoa(cfg.BlockSize), caching, strconv.Itoa(cfg.NumGPUBlocks),
			strconv.Itoa(cfg.MaxNumBatchedTokens), strconv.Itoa(cfg.MaxNumSeqs), "0"},
	}
}

// beginStep counts what scheduling the step decided. Called with mu held.
func (st *engineStats) beginStep(t stepTally) {
	st.preemptions += uint64(t.preemptions)
	st.prefixQueries += uint64(t.queriedTokens)
	st.prefixHits += uint64(t.cachedTokens)
	st.iterTokensNow = t.work.prefillTokens + t.work.decodeSeqs
}

// token records s's newest token, produced at now. Called with mu held,
// before s.lastTokenAt moves.
func (st *engineStats) token(s *seq, now time.Time) {
	st.generationTokens++
	if s.gen == 1 {
		st.promptTokens += uint64(s.promptTokens)
		st.ttft.observe(now.Sub(s.arrival).Seconds())
		return
	}
	gap := now.Sub(s.lastTokenAt).Seconds()
	st.itl.observe(gap)
}

// finished records a request that ended with its last token. Called with mu
// held.
func (st *engineStats) finished(s *seq, now time.Time) {
	st.success[s.finishReason]++
	st.e2e.observe(now.Sub(s.arrival).Seconds())
	st.queue.observe(s.scheduledAt.Sub(s.arrival).Seconds())
	st.prefill.observe(s.firstTokenAt.Sub(s.scheduledAt).Seconds())
	st.decode.observe(now.Sub(s.firstTokenAt).Seconds())
	st.inference.observe(now.Sub(s.scheduledAt).Seconds())
	if s.gen > 1 {
		st.requestTPOT.observe(now.Sub(s.firstTokenAt).Seconds() / float64(s.gen-1))
	}
	st.promptLen.observe(float64(s.promptTokens))
	st.genLen.observe(float64(s.gen))
	st.maxTokens.observe(float64(s.maxParam))
}

// endStep sets the gauges after a step. Called with mu held.
func (st *engineStats) endStep(running, waiting int, kv float64, m *stepModel, at time.Duration) {
	st.running, st.waiting, st.kvUsage = running, waiting, kv
	st.iterTokens.observe(float64(st.iterTokensNow))
	st.speed = m.lastNoise
	st.throttled = m.noise.throttle(at) > 1
}

// idle sets the gauges when the scheduler has nothing to run.
func (st *engineStats) idle(running []*seq, waiting int, kv float64) {
	st.mu.Lock()
	st.running, st.waiting, st.kvUsage = len(running), waiting, kv
	st.mu.Unlock()
}

// aborted counts a request dropped because its client went away.
func (st *engineStats) aborted() {
	st.mu.Lock()
	st.success[finishAbort]++
	st.mu.Unlock()
}

// Descriptors: vLLM's names, help texts and labels (model_name, engine).
var (
	metricLabels = []string{"model_name", "engine"}

	descRunning   = prometheus.NewDesc("vllm:num_requests_running", "Number of requests in model execution batches.", metricLabels, nil)
	descWaiting   = prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", metricLabels, nil)
	descGPUCache  = prometheus.NewDesc("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", metricLabels, nil)
	descKVCache   = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", metricLabels, nil)
	descCacheInfo = prometheus.NewDesc("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
		[]string{"block_size", "enable_prefix_caching", "num_gpu_blocks", "max_num_batched_tokens", "max_num_seqs", "engine"}, nil)

	descPreemptions  = prometheus.NewDesc("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", metricLabels, nil)
	descPromptTokens = prometheus.NewDesc("vllm:prompt_tokens_total", "Number of prefill tokens processed.", metricLabels, nil)
	descGenTokens    = prometheus.NewDesc("vllm:generation_tokens_total", "Number of generation tokens processed.", metricLabels, nil)
	descPCQueries    = prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", metricLabels, nil)
	descPCHits       = prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", metricLabels, nil)
	descGPUPCQueries = prometheus.NewDesc("vllm:gpu_prefix_cache_queries_total", "GPU prefix cache queries, in terms of number of queried tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.", metricLabels, nil)
	descGPUPCHits    = prometheus.NewDesc("vllm:gpu_prefix_cache_hits_total", "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.", metricLabels, nil)
	descSuccess      = prometheus.NewDesc("vllm:request_success_total", "Count of successfully processed requests.", append(metricLabels[:2:2], "finished_reason"), nil)

	descTTFT        = prometheus.NewDesc("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", metricLabels, nil)
	descITL         = prometheus.NewDesc("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", metricLabels, nil)
	descTPOT        = prometheus.NewDesc("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", metricLabels, nil)
	descRequestTPOT = prometheus.NewDesc("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", metricLabels, nil)
	descE2E         = prometheus.NewDesc("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", metricLabels, nil)
	descQueue       = prometheus.NewDesc("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", metricLabels, nil)
	descInference   = prometheus.NewDesc("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", metricLabels, nil)
	descPrefill     = prometheus.NewDesc("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", metricLabels, nil)
	descDecode      = prometheus.NewDesc("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", metricLabels, nil)
	descPromptLen   = prometheus.NewDesc("vllm:request_prompt_tokens", "Number of prefill tokens processed.", metricLabels, nil)
	descGenLen      = prometheus.NewDesc("vllm:request_generation_tokens", "Number of generation tokens processed.", metricLabels, nil)
	descMaxTokens   = prometheus.NewDesc("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", metricLabels, nil)
	descIterTokens  = prometheus.NewDesc("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", metricLabels, nil)

	// The sim's own state, for tests and a fake GPU monitor: no vLLM name.
	descSpeed     = prometheus.NewDesc("perfgate_sim_speed_factor", "Multiplier of step time from the simulated card, clock state, throttling and drift (1 = nominal).", metricLabels, nil)
	descThrottled = prometheus.NewDesc("perfgate_sim_throttled", "1 while the simulated card is in a throttle episode.", metricLabels, nil)
	descLeaked    = prometheus.NewDesc("perfgate_sim_leaked_bytes", "Bytes kept by the planted leak (leak_mb_per_1k_requests).", metricLabels, nil)
)

// Describe implements prometheus.Collector.
func (st *engineStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descGPUCache, descKVCache, descCacheInfo,
		descPreemptions, descPromptTokens, descGenTokens, descPCQueries, descPCHits, descGPUPCQueries, descGPUPCHits, descSuccess,
		descTTFT, descITL, descTPOT, descRequestTPOT, descE2E, descQueue, descInference, descPrefill, descDecode,
		descPromptLen, descGenLen, descMaxTokens, descIterTokens, descSpeed, descThrottled, descLeaked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (st *engineStats) Collect(ch chan<- prometheus.Metric) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := st.labels
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(descRunning, float64(st.running))
	gauge(descWaiting, float64(st.waiting))
	gauge(descGPUCache, st.kvUsage)
	gauge(descKVCache, st.kvUsage)
	ch <- prometheus.MustNewConstMetric(descCacheInfo, prometheus.GaugeValue, 1, st.cacheInfo...)
	counter(descPreemptions, st.preemptions)
	counter(descPromptTokens, st.promptTokens)
	counter(descGenTokens, st.generationTokens)
	counter(descPCQueries, st.prefixQueries)
	counter(descPCHits, st.prefixHits)
	counter(descGPUPCQueries, st.prefixQueries)
	counter(descGPUPCHits, st.prefixHits)
	for _, r := range finishReasons {
		ch <- prometheus.MustNewConstMetric(descSuccess, prometheus.CounterValue, float64(st.success[r]), l[0], l[1], r)
	}
	for _, h := range []struct {
		d *prometheus.Desc
		h *histogram
	}{
		{descTTFT, st.ttft}, {descITL, st.itl}, {descTPOT, st.itl}, {descRequestTPOT, st.requestTPOT},
		{descE2E, st.e2e}, {descQueue, st.queue}, {descInference, st.inference}, {descPrefill, st.prefill},
		{descDecode, st.decode}, {descPromptLen, st.promptLen}, {descGenLen, st.genLen},
		{descMaxTokens, st.maxTokens}, {descIterTokens, st.iterTokens},
	} {
		ch <- h.h.metric(h.d, l)
	}
	gauge(descSpeed, st.speed)
	throttled := 0.0
	if st.throttled {
		throttled = 1
	}
	gauge(descThrottled, throttled)
	if st.leaked != nil {
		gauge(descLeaked, float64(st.leaked()))
	}
}
