// Package result holds perfgate's benchmark result format: a superset of the
// JSON that `vllm bench serve --save-result` writes. Every vLLM key keeps its
// name and unit (per-request ttfts and itls in seconds, aggregates in ms);
// perfgate's own data sits under the "perfgate" key, so a vLLM file is a
// valid result with that section empty.
package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
)

// SchemaVersion is the version of the "perfgate" section this code writes.
const SchemaVersion = 1

// Result is one benchmark run.
type Result struct {
	// Keys as vLLM writes them.
	Date                 string      `json:"date,omitempty"`
	EndpointType         string      `json:"endpoint_type,omitempty"` // vLLM writes the backend here too
	Backend              string      `json:"backend,omitempty"`
	Label                string      `json:"label,omitempty"`
	ModelID              string      `json:"model_id,omitempty"`
	TokenizerID          string      `json:"tokenizer_id,omitempty"`
	NumPrompts           int         `json:"num_prompts,omitempty"`
	RequestRate          Rate        `json:"request_rate"`
	Burstiness           float64     `json:"burstiness,omitempty"`
	MaxConcurrency       *int        `json:"max_concurrency"`
	Duration             float64     `json:"duration"`
	Completed            int         `json:"completed"`
	Failed               int         `json:"failed"`
	TotalInputTokens     int         `json:"total_input_tokens"`
	TotalOutputTokens    int         `json:"total_output_tokens"`
	RequestThroughput    float64     `json:"request_throughput"`
	RequestGoodput       *float64    `json:"request_goodput"`
	OutputThroughput     float64     `json:"output_throughput"`
	TotalTokenThroughput float64     `json:"total_token_throughput"`
	MaxOutputTokensPerS  float64     `json:"max_output_tokens_per_s,omitempty"`
	MaxConcurrentReqs    float64     `json:"max_concurrent_requests,omitempty"`
	InputLens            []int       `json:"input_lens"`
	OutputLens           []int       `json:"output_lens"`
	TTFTs                []float64   `json:"ttfts"` // seconds, per request
	ITLs                 [][]float64 `json:"itls"`  // seconds, per request, per gap
	GeneratedTexts       []string    `json:"generated_texts,omitempty"`
	Errors               []string    `json:"errors"` // per request, "" when it succeeded

	// Metrics holds the flat aggregate keys vLLM writes, e.g. "mean_ttft_ms",
	// "median_tpot_ms", "std_itl_ms", "p99_e2el_ms", "p99.9_ttft_ms".
	Metrics map[string]float64 `json:"-"`

	// Extra keeps top-level keys this code does not know (vLLM writes the
	// --metadata pairs there), so a round trip loses nothing.
	Extra map[string]json.RawMessage `json:"-"`

	// Perfgate is perfgate's own section; nil in a plain vLLM file.
	Perfgate *Section `json:"perfgate,omitempty"`
}

// Place is a run's position in the job that measured it.
type Place struct {
	Job  int64  `json:"job"`
	Side string `json:"side,omitempty"` // "base" or "head" in an interleaved job
	Pair int    `json:"pair"`
	Seq  int    `json:"seq"` // the run's index in the job's order
}

// Section is what perfgate records beyond vLLM's keys.
type Section struct {
	SchemaVersion int               `json:"schema_version"`
	Tool          string            `json:"tool"` // "perfgate bench vX"
	StartedAt     string            `json:"started_at,omitempty"`
	Environment   Environment       `json:"environment"`
	Load          Load              `json:"load"`
	DatasetHash   string            `json:"dataset_hash,omitempty"` // sha256 of the prompts sent
	Metadata      map[string]string `json:"metadata,omitempty"`
	// Traffic is the load's shape (sessions, prompt mix, model mix) with
	// what the run drew; nil for the plain workload (traffic.go).
	Traffic *Traffic `json:"traffic,omitempty"`
	// RunID prefixes every request's X-Request-Id ("<run_id>-<index>"), so
	// the engine's logs and traces join with this result.
	RunID string `json:"run_id,omitempty"`
	// Place is where the run stood in its job, as the agent ran it: the
	// job, the side and pair of an interleaved job, and the run's position.
	// With it, `perfgate compare --paired` rebuilds the pairs and the
	// engine starts exactly as the server does; nil in files written by
	// `perfgate bench` alone.
	Place *Place `json:"place,omitempty"`
	// TokenSource says where output token counts came from: "usage" (the
	// server's usage block), "server_tokenizer" (the generated text counted
	// with the server's /tokenize), "chunks" (counted stream chunks: an
	// estimate, wrong whenever a chunk carries several tokens) or "mixed".
	TokenSource string `json:"token_source,omitempty"`
	// InputTokenSource says how prompt lengths were measured:
	// "server_tokenizer" (built and checked with the server's /tokenize)
	// or "whitespace" (one word, one token: an estimate on a real model).
	InputTokenSource string `json:"input_token_source,omitempty"`
	// Warnings are what a reader must know before trusting the numbers.
	Warnings []string `json:"warnings,omitempty"`
	// Per-request latencies in ms, aligned with the vLLM arrays; TPOT is 0
	// for requests with fewer than two output tokens.
	E2ELs []float64 `json:"e2els_ms,omitempty"`
	TPOTs []float64 `json:"tpots_ms,omitempty"`
	// ErrorCounts maps each distinct error message to its count.
	ErrorCounts map[string]int `json:"error_counts,omitempty"`
	ErrorRate   float64        `json:"error_rate"`
	// MaxErrorRate is the failed fraction the run was allowed;
	// ErrorRateExceeded is set when ErrorRate went above it, and the run
	// then measured too little to be used.
	MaxErrorRate      float64 `json:"max_error_rate,omitempty"`
	ErrorRateExceeded bool    `json:"error_rate_exceeded,omitempty"`
	Warmup            int     `json:"warmup_requests,omitempty"`
	// Client is the benchmark client's check on itself.
	Client *ClientCheck `json:"client,omitempty"`
	// Settings is what the engine ran with, read from the engine by the
	// agent (settings.go); nil where it was not read.
	Settings *EngineSettings `json:"engine_settings,omitempty"`
	// EngineFailures are the requests the engine itself ended early,
	// by prompt (engine.go).
	EngineFailures []EngineFailure `json:"engine_failures,omitempty"`
	// EngineClock is the client's timings beside the engine's own for
	// the same requests, where the engine reports them per request
	// (Ollama's native API; clock.go).
	EngineClock *EngineClock `json:"engine_clock,omitempty"`
	// ServerMetrics is what the engine's own Prometheus /metrics said
	// about the measured phase.
	ServerMetrics *ServerMetrics `json:"server_metrics,omitempty"`
	GPU           *GPUSummary    `json:"gpu,omitempty"`
	// EngineCPUSeconds is the CPU time the engine's processes (its root
	// and every descendant) used during the measured phase, as the agent
	// read it from the process table before and after; 0 when not measured
	// (a bench run by hand, the in-process sim). The window is the whole
	// bench run, its probe request included (one request more than the
	// measured ones, on base and head alike). Per output token it is the
	// engine's own work, which a busy neighbour on a shared CPU delays but
	// hardly changes.
	EngineCPUSeconds float64 `json:"engine_cpu_seconds,omitempty"`
}

// ClientCheck is the client's evidence that it, not the engine, did not
// limit the run. A run with ClientBound set measured the client.
type ClientCheck struct {
	// Schedule lag: how late each request was sent after it was due (its
	// arrival time had come and a concurrency slot was free).
	ScheduleLagP50MS float64 `json:"schedule_lag_p50_ms"`
	ScheduleLagP99MS float64 `json:"schedule_lag_p99_ms"`
	ScheduleLagMaxMS float64 `json:"schedule_lag_max_ms"`
	// RequestedRate is the offered arrival rate; AchievedRate is requests
	// sent per second from the first send to the last.
	RequestedRate Rate    `json:"requested_rate"`
	AchievedRate  float64 `json:"achieved_rate"`
	// CPUUtilization is the client process's CPU time over the measured
	// phase's wall time and its usable cores (1 = every core busy).
	CPUUtilization float64 `json:"cpu_utilization"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	Cores          int     `json:"cores"`
	// CPUShared is set when the process also ran the engine (--sim), so
	// its CPU time is not the client's alone and is not judged.
	CPUShared   bool   `json:"cpu_shared,omitempty"`
	ClientBound bool   `json:"client_bound"`
	Reason      string `json:"reason,omitempty"`
	// Delivery is how the tokens arrived; with DeliveryBound set, the
	// run's TPOT and ITL measure delivery, not decoding (clock.go). nil
	// for an unstreamed run.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// ServerMetrics is the engine's Prometheus /metrics scraped before and
// after the measured phase (vLLM's metric names).
type ServerMetrics struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"` // why not available
	URL       string `json:"url,omitempty"`
	// TTFT is the delta of vllm:time_to_first_token_seconds over the phase.
	TTFT *HistogramDelta `json:"ttft,omitempty"`
	// Preemptions is the delta of vllm:num_preemptions_total.
	Preemptions *float64 `json:"preemptions,omitempty"`
	// Prefix cache: deltas of vllm:prefix_cache_queries_total and
	// vllm:prefix_cache_hits_total (tokens), and their ratio.
	PrefixCacheQueries *float64 `json:"prefix_cache_queries,omitempty"`
	PrefixCacheHits    *float64 `json:"prefix_cache_hits,omitempty"`
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	// Gauges as scraped after the phase: num_requests_running,
	// num_requests_waiting, kv_cache_usage_perc (or gpu_cache_usage_perc).
	// The queue has drained by then, so they are mostly zero; During has
	// the same gauges sampled while the phase ran (Samples scrapes).
	After   map[string]float64   `json:"after,omitempty"`
	During  map[string]Aggregate `json:"during,omitempty"`
	Samples int                  `json:"samples,omitempty"`
	// Found lists the vLLM metric names the engine served.
	Found []string `json:"found,omitempty"`
	// TTFTGap is the client's TTFT minus the server's over the same phase:
	// what the HTTP path, tokenisation and the client add.
	TTFTGap *TTFTGap `json:"client_server_ttft_gap,omitempty"`
}

// HistogramDelta is a Prometheus histogram's growth over the phase, with
// quantiles estimated from its buckets as histogram_quantile does.
type HistogramDelta struct {
	Count    float64  `json:"count"`
	MeanMS   float64  `json:"mean_ms"`
	MedianMS float64  `json:"median_ms"`
	P99MS    float64  `json:"p99_ms"`
	Buckets  []Bucket `json:"buckets,omitempty"`
}

// Bucket is one cumulative histogram bucket: Count observations ≤ LE
// seconds. The +Inf bucket is not listed (JSON has no infinity): it is Count.
type Bucket struct {
	LE    float64 `json:"le"`
	Count float64 `json:"count"`
}

// TTFTGap compares the client's and the server's TTFT.
type TTFTGap struct {
	MedianMS float64 `json:"median_ms"`
	MeanMS   float64 `json:"mean_ms"`
}

// Environment is where a run ran. Two runs are comparable only when the
// fields that matter agree; see the gate.
type Environment struct {
	Hostname    string  `json:"hostname,omitempty"`
	GPUName     string  `json:"gpu_name,omitempty"`
	GPUUUID     string  `json:"gpu_uuid,omitempty"`
	GPUSerial   string  `json:"gpu_serial,omitempty"`
	GPUCount    int     `json:"gpu_count,omitempty"`
	Driver      string  `json:"driver_version,omitempty"`
	CUDA        string  `json:"cuda_version,omitempty"`
	PowerLimitW float64 `json:"power_limit_w,omitempty"`
	SMClockMHz  int     `json:"sm_clock_mhz,omitempty"`
	MemClockMHz int     `json:"mem_clock_mhz,omitempty"`
	ECCMode     string  `json:"ecc_mode,omitempty"`
	MIGMode     string  `json:"mig_mode,omitempty"`
	Persistence string  `json:"persistence_mode,omitempty"`
	EngineImage string  `json:"engine_image,omitempty"` // image@sha256:… or the command as configured: the identity runs are compared by
	// EngineCommand is the command as it ran, its placeholders filled in
	// (a checkout's path differs per commit, so it is shown, never
	// compared).
	EngineCommand string `json:"engine_command,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	// EngineName is the engine as it names itself ("ollama", "vllm",
	// "perfgate-sim"), read from the engine with EngineVersion.
	EngineName string `json:"engine_name,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Sim        bool   `json:"sim,omitempty"` // the built-in simulated engine
	// SourceTree is the digest of the checkout of Commit the engine ran
	// from ("sha256:…" over every path, mode and content), so two runs of
	// one commit are known to have run the same files.
	SourceTree string `json:"source_tree,omitempty"`
	// EngineBuild is the image id server.build produced from the checkout
	// (the image the engine ran); EngineImage stays the pinned base.
	EngineBuild string `json:"engine_build,omitempty"`
	// Sandbox is how the engine was contained: "container" (the sandbox),
	// "uncontained" (a command engine on the host, allowed by the runner's
	// allow_uncontained) or "" (the in-process simulated engine).
	Sandbox string `json:"sandbox,omitempty"`
	// FakeGPU is set when the card was the runner's simulated one
	// (--fake-gpu): the GPU fields describe a script, not hardware.
	FakeGPU bool `json:"fake_gpu,omitempty"`
	// The host's processor, where a CPU engine (or the client) ran: its
	// model, the cores the agent could use and the frequency governor.
	CPUModel    string `json:"cpu_model,omitempty"`
	CPUCores    int    `json:"cpu_cores,omitempty"`
	CPUGovernor string `json:"cpu_governor,omitempty"`
}

// Load is the offered load: what must match for two runs to compare.
type Load struct {
	Endpoint       string  `json:"endpoint"`
	Model          string  `json:"model"`
	Dataset        string  `json:"dataset"`
	NumPrompts     int     `json:"num_prompts"`
	InputLen       int     `json:"input_len,omitempty"`
	OutputLen      int     `json:"output_len,omitempty"`
	RequestRate    Rate    `json:"request_rate"`
	Burstiness     float64 `json:"burstiness"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Seed           int64   `json:"seed"`
	Temperature    float64 `json:"temperature"`
	// NoStream is set when requests asked for one JSON answer, not a stream.
	NoStream bool `json:"no_stream,omitempty"`
	// TraceTimeScale multiplies a replayed trace's timestamps.
	TraceTimeScale float64 `json:"trace_time_scale,omitempty"`
}

// GPUSummary is the NVML telemetry of one measured run.
type GPUSummary struct {
	Available  bool                 `json:"available"`
	Reason     string               `json:"reason,omitempty"` // why not available
	Samples    int                  `json:"samples"`
	IntervalMS int                  `json:"interval_ms"`
	Series     map[string]Aggregate `json:"series,omitempty"` // "util_pct", "mem_used_mib", "power_w", "sm_clock_mhz", "mem_clock_mhz", "temp_c"
	Valid      bool                 `json:"valid"`
	Invalid    []string             `json:"invalid,omitempty"`  // reasons the run is not trustworthy
	Warnings   []string             `json:"warnings,omitempty"` // noted, not disqualifying
	EnergyJ    float64              `json:"energy_j,omitempty"`
}

// Aggregate summarises one telemetry series.
type Aggregate struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	P95  float64 `json:"p95"`
}

// Rate is a request rate in requests/s where +Inf ("inf" in vLLM's JSON)
// means all requests at once.
type Rate float64

// metricKey matches vLLM's flat aggregate keys.
var metricKey = regexp.MustCompile(`^(mean|median|std|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el)_ms$`)

// IsMetricKey reports whether key is one of vLLM's flat aggregate keys
// ("median_ttft_ms", "p99.9_itl_ms"), which Result keeps in Metrics.
func IsMetricKey(key string) bool { return metricKey.MatchString(key) }

// Metric returns a flat aggregate such as "p99_tpot_ms" and whether it exists.
func (r *Result) Metric(key string) (float64, bool) {
	v, ok := r.Metrics[key]
	return v, ok
}

type plain Result // no methods: avoids recursion in (Un)MarshalJSON

// MarshalJSON writes the struct fields, the flat metric keys and Extra.
func (r Result) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(plain(r))
	if err != nil {
		return nil, err
	}
	if len(r.Metrics) == 0 && len(r.Extra) == 0 {
		return base, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	for k, v := range r.Extra {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	for k, v := range r.Metrics {
		m[k] = json.RawMessage(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return marshalSorted(m)
}

// UnmarshalJSON reads vLLM's and perfgate's keys alike.
func (r *Result) UnmarshalJSON(data []byte) error {
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	known := knownKeys()
	p.Metrics = map[string]float64{}
	for k, raw := range m {
		switch {
		case metricKey.MatchString(k):
			var v *float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			if v != nil {
				p.Metrics[k] = *v
			}
		case !known[k]:
			if p.Extra == nil {
				p.Extra = map[string]json.RawMessage{}
			}
			p.Extra[k] = raw
		}
	}
	*r = Result(p)
	return nil
}

// LoadFile reads a file holding one result written by perfgate or by vLLM.
// A file of several results (vLLM's --append-result) is refused here; read
// it with LoadAll.
func LoadFile(path string) (*Result, error) {
	rs, err := LoadAll(path)
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("parse result %s: it holds %d results (one per line, as --append-result writes); read it as a set of runs", path, len(rs))
	}
	return rs[0], nil
}

// LoadAll reads every result in a file: one JSON object, or several one
// after another as `vllm bench serve --append-result` and `perfgate bench
// --append-result` write them (one object per line).
func LoadAll(path string) ([]*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	rs, err := ParseAll(data)
	if err != nil {
		return nil, fmt.Errorf("parse result %s: %w", path, err)
	}
	return rs, nil
}

// Parse decodes a result and checks it is one: it must have at least the
// keys every vLLM result has.
func Parse(data []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.Completed == 0 && len(r.Metrics) == 0 && r.Perfgate == nil {
		return nil, fmt.Errorf("not a benchmark result: no \"completed\" count and no metric keys such as \"median_ttft_ms\"")
	}
	return &r, nil
}

// ParseAll decodes one result or a sequence of results written one after
// another (JSON Lines, as --append-result appends them). Each must be a
// result; an error names the object by its position and line.
func ParseAll(data []byte) ([]*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []*Result
	for {
		var raw json.RawMessage
		start := dec.InputOffset()
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		pos := int(start)
		for pos < len(data) && (data[pos] == ' ' || data[pos] == '\t' || data[pos] == '\r' || data[pos] == '\n') {
			pos++
		}
		line := 1 + bytes.Count(data[:pos], []byte{'\n'})
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("result %d (after line %d): %w", len(out)+1, line, err)
		}
		r, err := Parse(raw)
		if err != nil {
			if len(out) == 0 && !dec.More() {
				return nil, err // a single object: its error as it is
			}
			return nil, fmt.Errorf("result %d (line %d): %w", len(out)+1, line, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("no result in the input")
	}
	return out, nil
}

// AppendFile adds r as one JSON line at the end of path, creating it: the
// --append-result format, one result per line.
func (r *Result) AppendFile(path string) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("append result: %w", err)
	}
	// vLLM writes a newline before each appended object and none after
	// the last; perfgate ends each line. Start a new line when the file
	// does not end with one, so either writer can append after the other.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			data = append([]byte{'\n'}, data...)
		}
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append result: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append result: %w", err)
	}
	return nil
}

// WriteFile writes r as indented JSON.
func (r *Result) WriteFile(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

func knownKeys() map[string]bool {
	keys := map[string]bool{}
	var probe map[string]json.RawMessage
	b, _ := json.Marshal(plain{Perfgate: &Section{}, Date: "x", Backend: "x", ModelID: "x", TokenizerID: "x",
		NumPrompts: 1, Burstiness: 1, MaxOutputTokensPerS: 1, MaxConcurrentReqs: 1, GeneratedTexts: []string{""}})
	_ = json.Unmarshal(b, &probe)
	for k := range probe {
		keys[k] = true
	}
	return keys
}

func marshalSorted(m map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("encode key %q: %w", k, err)
		}
		buf = append(buf, kb...)
		buf = append(buf, ':')
		buf = append(buf, m[k]...)
	}
	return append(buf, '}'), nil
}
