// Package bench is perfgate's benchmark client, the equal of
// `vllm bench serve`: it sends a dataset of prompts to an OpenAI-compatible
// engine at a chosen arrival rate and concurrency (or replays a trace at
// its timestamps), times each streamed answer and aggregates the timings
// into vLLM's result keys.
//
// The data flow reads top-down as in vLLM's client: a first request alone
// (probe.go), a request function (request.go) → one record per request →
// aggregate (metrics.go) → the result, with the client's check on itself
// (selfcheck.go) and the engine's own /metrics (servermetrics.go) beside
// it. Metric definitions and key names follow vllm/benchmarks/serve.py so a
// perfgate result and a vLLM result compare number for number.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Endpoints the client speaks.
const (
	EndpointChat        = "/v1/chat/completions"
	EndpointCompletions = "/v1/completions"
)

// Defaults applied to zero Options fields. Dataset sizes follow vLLM's
// random dataset defaults.
const (
	DefaultNumPrompts = 1000
	DefaultInputLen   = 1024
	DefaultOutputLen  = 128
	DefaultTimeout    = 5 * time.Minute
	// DefaultRequestTimeout bounds one whole request, tokens flowing or
	// not: a server that trickles a token a minute must not hold a run.
	DefaultRequestTimeout = 30 * time.Minute
	// DefaultMaxLineBytes bounds one SSE line (and a non-streamed answer):
	// a server that never ends a line cannot make the client buffer it all.
	DefaultMaxLineBytes = 4 << 20
	// DefaultMaxErrorRate is the failed fraction above which a run
	// measured too little to use; the runner agent uses the same value.
	DefaultMaxErrorRate = 0.05
)

// DefaultPercentiles are the percentiles reported when none are asked for.
// vLLM reports only p99 by default; a gate needs the spread too.
var DefaultPercentiles = []float64{50, 90, 95, 99}

// Options says what load to offer and where.
type Options struct {
	// Target is the engine's base URL, e.g. http://127.0.0.1:8000.
	Target string
	// Endpoint is EndpointChat (default), EndpointCompletions or
	// EndpointOllama (Ollama's native API, whose answers carry the
	// engine's own clock: the result's EngineClock).
	Endpoint string
	// Backend is vLLM's name for the request function, written as the
	// result's backend and endpoint_type: "openai-chat" for the chat
	// endpoint, "openai" (or "vllm") for completions; "" derives it.
	Backend string
	// Label is recorded as the result's label (vLLM's --label).
	Label string
	// Model is sent in each request; "" asks GET /v1/models and takes the first.
	Model string
	// APIKey is sent as a bearer token when set (vLLM reads OPENAI_API_KEY).
	APIKey string
	// Dataset is "random" (default), "sharegpt", "jsonl", or a trace
	// ("timed_trace", "mooncake", "bailian"); all but random read DatasetPath.
	Dataset, DatasetPath string
	// InputLen is the random dataset's prompt length in tokens. OutputLen
	// is max_tokens: fixed for random, an override for the other datasets.
	InputLen, OutputLen int
	// NumPrompts is the number of measured requests; for a trace, 0 is
	// every row.
	NumPrompts int
	// RequestRate is the mean arrival rate in requests/s; 0 or result.Inf
	// sends everything at once. A trace sets its own arrival times.
	RequestRate result.Rate
	// Burstiness is the gamma shape of inter-arrival times: 1 (default) is
	// a Poisson process, below 1 burstier, above 1 more even.
	Burstiness float64
	// TraceTimeScale multiplies a trace's timestamps (0.5 replays it twice
	// as fast); 0 is 1. TraceBlockSize is the tokens per hash id; 0 is the
	// format's (512 for mooncake and timed_trace, 16 for bailian).
	TraceTimeScale float64
	TraceBlockSize int
	// TraceOverlong says what to do with a trace row whose prompt and
	// output do not fit the model's max_model_len: OverlongSkip (the
	// default; counted in the result's warnings), OverlongTruncate or
	// OverlongFail.
	TraceOverlong string
	// MaxConcurrency caps requests in flight; 0 is no cap. With sessions
	// it caps sessions in flight (each has one request out at a time).
	MaxConcurrency int
	// Traffic shapes the load (traffic.go): multi-turn sessions, whose
	// arrivals RequestRate and Burstiness then time; a prompt length mix;
	// a model mix. Nil is the plain workload.
	Traffic *result.Traffic
	// Warmup requests are sent first, with prompts of their own, and discarded.
	Warmup int
	Seed   int64
	// Temperature is sent in every request (0: greedy).
	Temperature float64
	// IgnoreEOS asks the engine to generate max_tokens whatever it
	// samples; the random dataset and traces always ask.
	IgnoreEOS bool
	// CacheSalt is sent as every request's cache_salt (vLLM ≥ 0.9): prompts
	// cached under another salt — an earlier run's — are not reused, so
	// repeated runs of the same prompts are each as cold as the first. The
	// first request, which reuses the first prompt, gets a salt of its own.
	CacheSalt string
	// NoStream sends non-streaming requests: TTFT is then the whole answer's time.
	NoStream bool
	// SaveTexts keeps each request's generated text for the result's
	// generated_texts (vLLM's --save-detailed); without it the key holds
	// empty strings, as the text is not kept.
	SaveTexts bool
	// Timeout is how long one request may wait for the response to start or
	// for its next stream line before it fails; 0 is DefaultTimeout.
	Timeout time.Duration
	// RequestTimeout bounds a whole request; 0 is DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxLineBytes bounds an SSE line; 0 is DefaultMaxLineBytes.
	MaxLineBytes int
	// ReadyTimeout keeps retrying the first request while the engine is
	// not ready (5xx, refused connections) for this long; 0 tries 3 times.
	ReadyTimeout time.Duration
	// MaxErrorRate is the failed fraction a run may have; above it the
	// result is marked (ErrorRateExceeded). 0 is DefaultMaxErrorRate.
	MaxErrorRate float64
	// Goodput maps "ttft", "tpot" and "e2el" to SLOs in ms.
	Goodput map[string]float64
	// Metadata is recorded with the result, like vLLM's --metadata.
	Metadata map[string]string
	// Percentiles to report; nil is DefaultPercentiles.
	Percentiles []float64
	// Progress gets a progress bar when it is a terminal; nil for none.
	Progress io.Writer
	// Client sends the requests; nil builds one whose idle pool holds a
	// connection per concurrent request.
	Client *http.Client
	// RunID prefixes each request's X-Request-Id ("<RunID>-<index>", index
	// counting measured requests from 0) and is recorded in the result;
	// "" picks a random one.
	RunID string
	// Self-check limits (0: the defaults). CPUShared says this process
	// also runs the engine (--sim), so its CPU time is not judged.
	MaxScheduleLag time.Duration
	MaxClientCPU   float64
	CPUShared      bool
	// MaxTTFTGap is the floor of how far the client's mean TTFT may sit
	// above the engine's own (from /metrics) before the run is flagged
	// client-bound; 0 is DefaultMaxTTFTGap.
	MaxTTFTGap time.Duration
}

// UsageError is a bad option; Flag names the perfgate bench flag to fix.
type UsageError struct {
	Flag string
	Msg  string
}

func (e *UsageError) Error() string { return "--" + e.Flag + ": " + e.Msg }

func usageErr(flag, format string, args ...any) error {
	return &UsageError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// Run offers the load and returns the result. Failed requests are counted
// in the result, never returned as an error; a run whose failed fraction
// is above MaxErrorRate is returned marked ErrorRateExceeded. Run errs on
// bad options (a *UsageError), when the first request fails (a
// *ProbeError, or "never answered"), or when ctx ends first.
func Run(ctx context.Context, o Options) (*result.Result, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	target := strings.TrimRight(o.Target, "/")
	client := o.Client
	if client == nil {
		client = defaultClient(&o)
	}

	// The model list is read once, when needed: to pick the model, or to
	// hint at the right one when the first request fails.
	var models *modelInfo
	listed := func() modelInfo {
		if models == nil {
			m := listModels(ctx, client, target, o.APIKey, o.Timeout)
			models = &m
		}
		return *models
	}
	model, err := chooseModel(o.Model, listed)
	if err != nil {
		return nil, err
	}

	var warnings []string
	p, maxModelLen, why, err := promptMeasure(ctx, client, target, model, o.APIKey, o.Timeout)
	if err != nil {
		return nil, err
	}
	if p.tok == nil {
		warnings = append(warnings, why+": prompt lengths are counted in words, not model tokens")
	}
	if models != nil && models.maxLen[model] > 0 {
		maxModelLen = models.maxLen[model]
	}

	// Separate streams so the arrival schedule does not shift when the
	// dataset changes size, and vice versa.
	dataRNG := mrand.New(mrand.NewPCG(uint64(o.Seed), 0x5eed_da7a))
	arrivalRNG := mrand.New(mrand.NewPCG(uint64(o.Seed), 0x5eed_a771))
	p.maxModelLen = maxModelLen
	data, err := loadRequests(ctx, &o, dataRNG, p)
	if err != nil {
		return nil, err
	}
	measured, warmup := data.measured, data.warmup
	if w := data.overlong.warning(); w != "" {
		warnings = append(warnings, w)
	}
	runID := o.RunID
	if runID == "" {
		runID = newRunID()
	}

	q := &requester{
		client:      client,
		url:         target + o.Endpoint,
		chat:        o.Endpoint == EndpointChat,
		native:      o.Endpoint == EndpointOllama,
		stream:      !o.NoStream,
		model:       model,
		temperature: o.Temperature,
		// As vLLM: random prompts run to max_tokens, and a trace's
		// output lengths are what the trace says.
		ignoreEOS: o.IgnoreEOS || o.Dataset == "random" || isTrace(o.Dataset),
		cacheSalt: o.CacheSalt,
		apiKey:    o.APIKey,
		idle:      o.Timeout,
		deadline:  o.RequestTimeout,
		maxLine:   o.MaxLineBytes,
	}

	// The first request alone: a wrong setup stops here, with the
	// server's own words, instead of producing a table of zeros.
	pr, err := probe(ctx, q, probeRequest(runID, measured[0], o.CacheSalt), &o, listed)
	if err != nil {
		return nil, err
	}
	// Without a usage block output tokens must be counted: keep the text
	// for the server's tokenizer, or fall back to counting chunks.
	q.captureText = (!pr.usage && p.tok != nil) || o.SaveTexts

	startedAt := time.Now().UTC()
	if err := runWarmup(ctx, q, &o, runID, warmup); err != nil {
		return nil, err
	}

	sessions := o.Traffic != nil && o.Traffic.Sessions != nil
	reqs, offsets, err := measuredRequests(q, &o, runID, measured, sessions, arrivalRNG)
	if err != nil {
		return nil, err
	}
	// Connections are opened before the measured phase: a dial inside it
	// would count as the first requests' lag and TTFT, and as client CPU.
	warmConnections(ctx, client, target, o.APIKey, min(len(reqs), maxWarmConns), o.MaxConcurrency, o.Timeout)
	metricsURL := target + "/metrics"
	before := scrapeMetrics(ctx, client, metricsURL, o.APIKey)
	var gauges *gaugeSampler
	if before.err == nil {
		gauges = sampleGauges(ctx, client, metricsURL, o.APIKey, gaugeSampleEvery)
	}
	bar := newProgress(o.Progress, len(reqs))
	cpuFrom := markCPU()
	var recs []record
	var dur time.Duration
	if sessions {
		s := o.Traffic.Sessions
		recs, dur = runSessions(ctx, q, reqs, s.Turns, offsets, time.Duration(s.ThinkTimeMS*float64(time.Millisecond)), o.MaxConcurrency, bar.add)
	} else {
		recs, dur = runPhase(ctx, q, reqs, offsets, o.MaxConcurrency, bar.add)
	}
	cpuTo := markCPU()
	bar.finish()
	during, samples := gauges.finish()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("benchmark interrupted: %w", err)
	}
	after := scrapeMetrics(ctx, client, metricsURL, o.APIKey)

	source, warn, err := countOutputs(ctx, recs, p, pr.usage)
	if err != nil {
		return nil, err
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	if p.tok == nil {
		useServerPromptLens(recs)
	}

	r := aggregate(recs, dur, o.Percentiles, o.Goodput)
	r.Perfgate.EngineFailures = engineFailures(recs, sessions)
	r.Perfgate.EngineClock = engineClockOf(recs)
	if err := addVLLMArrays(r, recs, o.SaveTexts); err != nil {
		return nil, err
	}
	if err := describeVLLM(r, &o, model, startedAt, len(measured), p.tok != nil); err != nil {
		return nil, err
	}
	sec := r.Perfgate
	describeRun(sec, &o, model, startedAt, runID, measured, source, p.tok != nil)
	sec.MaxErrorRate = o.MaxErrorRate
	sec.ErrorRateExceeded = sec.ErrorRate > o.MaxErrorRate
	sec.ServerMetrics = serverMetrics(metricsURL, before, after, successfulTTFTs(recs))
	if sec.ServerMetrics.Available {
		sec.ServerMetrics.During, sec.ServerMetrics.Samples = during, samples
	}
	sec.Client = selfCheck(recs, &o, cpuFrom, cpuTo, sec.ServerMetrics)
	if o.NoStream {
		warnings = append(warnings, "--no-stream: each answer arrives whole, so TTFT is the end-to-end latency and TPOT and ITL are not measured")
	}
	sec.Warnings = warnings
	return r, nil
}

// loadRequests loads the dataset and checks that it has requests to send
// and that they fit the model's context.
func loadRequests(ctx context.Context, o *Options, rng *mrand.Rand, p promptTokens) (dataset, error) {
	data, err := loadSamples(ctx, o, rng, p)
	if err != nil {
		return data, samplesErr(ctx, err)
	}
	if len(data.measured) == 0 {
		return data, usageErr("num-prompts", "no requests to send")
	}
	if p.maxModelLen > 0 {
		if err := checkFits(data.measured, p.maxModelLen, o.Dataset); err != nil {
			return data, err
		}
	}
	return data, nil
}

// probeRequest is the first request, sent alone and short.
func probeRequest(runID string, first sample, cacheSalt string) request {
	req := request{id: runID + "-probe", prompt: first.prompt, promptLen: first.promptLen,
		maxTokens: min(first.maxTokens, 16)}
	if cacheSalt != "" {
		req.salt = cacheSalt + "-probe" // leaves the first prompt uncached for the run
	}
	return req
}

// describeRun fills perfgate's section with what describes the run: the
// tool, the load, the dataset and where token counts came from.
func describeRun(sec *result.Section, o *Options, model string, startedAt time.Time, runID string, measured []sample, source string, serverTokens bool) {
	sec.SchemaVersion = result.SchemaVersion
	sec.Tool = toolName()
	sec.StartedAt = startedAt.Format(time.RFC3339Nano)
	sec.RunID = runID
	sec.Load = result.Load{
		Endpoint:       o.Endpoint,
		Model:          model,
		Dataset:        o.Dataset,
		NumPrompts:     len(measured),
		InputLen:       o.InputLen,
		OutputLen:      o.OutputLen,
		RequestRate:    o.RequestRate,
		Burstiness:     o.Burstiness,
		MaxConcurrency: o.MaxConcurrency,
		Seed:           o.Seed,
		Temperature:    o.Temperature,
		NoStream:       o.NoStream,
	}
	if isTrace(o.Dataset) {
		sec.Load.TraceTimeScale = o.TraceTimeScale
	}
	sec.DatasetHash = datasetHash(measured)
	sec.Traffic = trafficRecord(o, measured)
	if len(o.Metadata) > 0 {
		sec.Metadata = o.Metadata
	}
	sec.Warmup = o.Warmup
	sec.TokenSource = source
	sec.InputTokenSource = tokenSourceWords
	if serverTokens {
		sec.InputTokenSource = tokenSourceServer
	}
}

// chooseModel is --model, or the first model the server lists.
func chooseModel(model string, listed func() modelInfo) (string, error) {
	if model != "" {
		return model, nil
	}
	mi := listed()
	if mi.down {
		return "", mi.err
	}
	if mi.err != nil {
		return "", fmt.Errorf("%w; pass --model", mi.err)
	}
	return mi.ids[0], nil
}

// samplesErr says why the dataset could not be loaded: a usage error as
// it is, an interruption, or the dataset file's fault.
func samplesErr(ctx context.Context, err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("benchmark interrupted: %w", ctx.Err())
	}
	return usageErr("dataset-path", "%v", err)
}

// runWarmup sends the warm-up requests, unmeasured.
func runWarmup(ctx context.Context, q *requester, o *Options, runID string, warmup []sample) error {
	if len(warmup) == 0 {
		return nil
	}
	reqs := make([]request, len(warmup))
	for i, s := range warmup {
		reqs[i] = request{id: fmt.Sprintf("%s-warmup-%d", runID, i), prompt: s.prompt, promptLen: s.promptLen, maxTokens: s.maxTokens}
	}
	runPhase(ctx, q, reqs, nil, o.MaxConcurrency, nil)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("benchmark interrupted during warmup: %w", err)
	}
	return nil
}

// measuredRequests builds the measured phase's requests, their bodies
// encoded, and their due times: a trace's own, else drawn from the rate
// (for sessions, the sessions' arrivals).
func measuredRequests(q *requester, o *Options, runID string, measured []sample, sessions bool, arrivalRNG *mrand.Rand) ([]request, []time.Duration, error) {
	reqs := make([]request, len(measured))
	offsets := make([]time.Duration, len(measured))
	for i, s := range measured {
		reqs[i] = request{id: fmt.Sprintf("%s-%d", runID, i), prompt: s.prompt, promptLen: s.promptLen, maxTokens: s.maxTokens,
			model: s.model, messages: s.messages}
		offsets[i] = s.offset
	}
	switch {
	case sessions:
		// The rate times the sessions' arrivals; their turns follow answers.
		offsets = arrivalOffsets(sessionCount(o), float64(o.RequestRate), o.Burstiness, arrivalRNG)
	case !isTrace(o.Dataset):
		offsets = arrivalOffsets(len(reqs), float64(o.RequestRate), o.Burstiness, arrivalRNG)
	}
	// Bodies are encoded before the measured phase: work between a
	// request's due time and its send is lag.
	for i := range reqs {
		var err error
		if reqs[i].body, err = q.body(reqs[i]); err != nil {
			return nil, nil, fmt.Errorf("encode request %d: %w", i, err)
		}
	}
	return reqs, offsets, nil
}

// useServerPromptLens replaces counted words with the server's prompt
// token counts where it reported them: words are only an estimate of a
// real model's prompt tokens; the server's own count (template included)
// is closer.
func useServerPromptLens(recs []record) {
	for i := range recs {
		if recs[i].usagePrompt > 0 {
			recs[i].promptLen = recs[i].usagePrompt
		}
	}
}

// describeVLLM fills the run's description in vLLM's top-level fields.
func describeVLLM(r *result.Result, o *Options, model string, startedAt time.Time, numPrompts int, serverTokens bool) error {
	r.Date = startedAt.Local().Format("20060102-150405") // vLLM's format
	r.Backend = o.Backend
	r.EndpointType = o.Backend
	r.Label = o.Label
	r.ModelID = model
	r.TokenizerID = tokenSourceWords // one word, one token
	if serverTokens {
		r.TokenizerID = "server:" + model
	}
	r.NumPrompts = numPrompts
	r.RequestRate = o.RequestRate
	r.Burstiness = o.Burstiness
	if o.MaxConcurrency > 0 {
		c := o.MaxConcurrency
		r.MaxConcurrency = &c
	}
	// vLLM writes --metadata pairs as top-level keys; keep that, and keep
	// them in perfgate's section where they cannot collide with a metric.
	for k, v := range o.Metadata {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode metadata %s: %w", k, err)
		}
		if r.Extra == nil {
			r.Extra = map[string]json.RawMessage{}
		}
		r.Extra[k] = b
	}
	return nil
}

// promptMeasure finds how prompts are measured: the server's /tokenize
// when it has one (with the words it reads as single tokens), else words,
// with why not. A /tokenize that answers but fails (a wrong model, say) is
// not the run's business yet: the first request will say what is wrong.
func promptMeasure(ctx context.Context, client *http.Client, target, model, apiKey string, timeout time.Duration) (p promptTokens, maxLen int, why string, err error) {
	tok, maxLen, err := detectTokenizer(ctx, client, target, model, apiKey, timeout)
	var down *noAnswerError
	switch {
	case errors.As(err, &down):
		return promptTokens{}, 0, "", fmt.Errorf("target %s never answered: %s", target, cleanError(down.err))
	case errors.Is(err, errNoTokenize):
		return promptTokens{}, 0, "the server has no /tokenize", nil
	case err != nil:
		return promptTokens{}, 0, fmt.Sprintf("the server's /tokenize failed (%s)", oneLine(err.Error())), nil
	}
	rootCount, fp, err := tok.fingerprint(ctx, vocabText())
	if err != nil {
		return promptTokens{}, 0, fmt.Sprintf("the server's /tokenize failed (%s)", oneLine(err.Error())), nil
	}
	cal := calibrationFor(calibrationKey{url: tok.url, model: model, fingerprint: fp})
	counted := cachedCounter{inner: tok, cal: cal}
	cal.mu.Lock()
	vocab := cal.vocab
	cal.mu.Unlock()
	if vocab == nil {
		vocab, err = singleTokenWords(ctx, counted, rootCount)
		switch {
		case err != nil:
			return promptTokens{}, 0, fmt.Sprintf("the server's /tokenize failed (%s)", oneLine(err.Error())), nil
		case len(vocab) < 16:
			// A tokenizer that splits common words: prompts are still fitted
			// to their lengths, word by word, but blocks may not stay aligned.
			vocab = words
		}
		cal.mu.Lock()
		cal.vocab = vocab
		cal.mu.Unlock()
	}
	return promptTokens{tok: counted, vocab: vocab}, maxLen, "", nil
}

// checkFits refuses prompts the model cannot take: vLLM would answer each
// with HTTP 400, and the run would measure nothing.
func checkFits(samples []sample, maxModelLen int, dataset string) error {
	worst := 0
	for i := range samples {
		if n := samples[i].promptLen + samples[i].maxTokens; n > samples[worst].promptLen+samples[worst].maxTokens {
			worst = i
		}
	}
	s := samples[worst]
	if s.promptLen+s.maxTokens <= maxModelLen {
		return nil
	}
	switch {
	case isTrace(dataset):
		// fitRows let only fitting rows through, by their stated lengths;
		// the server's tokenizer made this prompt longer than its row said.
		return usageErr("trace-overlong", "a trace request of %d prompt + %d output tokens does not fit the model's max_model_len %d once measured with the server's tokenizer; pass --trace-overlong truncate or a shorter --output-len",
			s.promptLen, s.maxTokens, maxModelLen)
	case dataset != "random":
		return usageErr("output-len", "a request of %d prompt + %d output tokens from --dataset-path does not fit the model's max_model_len %d; lower --output-len or use prompts that fit",
			s.promptLen, s.maxTokens, maxModelLen)
	}
	return usageErr("input-len", "a request of %d prompt + %d output tokens does not fit the model's max_model_len %d; shorten --input-len or --output-len",
		s.promptLen, s.maxTokens, maxModelLen)
}

// countOutputs decides where output token counts come from. With usage
// blocks, from them; without, the generated text is counted with the
// server's tokenizer when it has one, else each stream chunk is taken as
// a token (an estimate, said in the warning).
func countOutputs(ctx context.Context, recs []record, p promptTokens, usage bool) (source, warning string, err error) {
	var todo []int
	for i := range recs {
		if recs[i].ok && !(recs[i].usage && recs[i].usageOut > 0) && recs[i].text != nil {
			todo = append(todo, i)
		}
	}
	if p.tok != nil && len(todo) > 0 {
		err = parallel(ctx, len(todo), func(k int) error {
			rec := &recs[todo[k]]
			n, err := p.tok.count(ctx, unquote(rec.text))
			rec.counted = n
			return err
		})
		if err != nil {
			return "", "", fmt.Errorf("count output tokens with the server's tokenizer: %w", err)
		}
	}
	seen := map[string]int{}
	for i := range recs {
		if recs[i].ok {
			_, s := recs[i].outputTokens()
			seen[s]++
		}
	}
	switch len(seen) {
	case 0:
		source = ""
	case 1:
		for s := range seen {
			source = s
		}
	default:
		source = tokenSourceMixed
	}
	switch {
	case seen[tokenSourceChunks] > 0:
		warning = fmt.Sprintf("%d request(s) had no usage block and the server has no /tokenize: their output tokens are counted as stream chunks, an estimate that is wrong (TPOT and output throughput with it) when a chunk carries several tokens", seen[tokenSourceChunks])
	case seen[tokenSourceServer] > 0:
		warning = fmt.Sprintf("%d request(s) had no usage block: their output tokens were counted with the server's /tokenize", seen[tokenSourceServer])
	}
	return source, warning, nil
}

func successfulTTFTs(recs []record) []float64 {
	var out []float64
	for i := range recs {
		if recs[i].ok {
			out = append(out, recs[i].ttft)
		}
	}
	return out
}

// normalize fills defaults and rejects bad options, one group of flags at
// a time in the order their errors are reported.
func (o *Options) normalize() error {
	for _, step := range []func() error{
		o.normalizeTarget,
		o.normalizeEndpoint,
		o.normalizeDataset,
		o.normalizeSizes,
		o.normalizeArrivals,
		o.normalizeTrace,
		o.normalizeLimits,
		o.normalizeMetrics,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// normalizeTarget checks --target: an http(s) base URL.
func (o *Options) normalizeTarget() error {
	if o.Target == "" {
		return usageErr("target", "required: the engine's base URL, e.g. http://127.0.0.1:8000")
	}
	u, err := url.Parse(o.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("target", "%q is not an http(s) URL such as http://127.0.0.1:8000", o.Target)
	}
	return nil
}

// normalizeDataset picks the dataset and checks it has the file it needs.
func (o *Options) normalizeDataset() error {
	switch {
	case o.Dataset == "":
		o.Dataset = "random"
		fallthrough
	case o.Dataset == "random":
		if o.DatasetPath != "" {
			return usageErr("dataset-path", "the random dataset takes no file; use --dataset sharegpt, jsonl or a trace")
		}
	case o.Dataset == "sharegpt" || o.Dataset == "jsonl" || isTrace(o.Dataset):
		if o.DatasetPath == "" {
			return usageErr("dataset-path", "required with --dataset %s", o.Dataset)
		}
	default:
		return usageErr("dataset", "%q: want random, sharegpt, jsonl, %s, %s or %s", o.Dataset, DatasetTimedTrace, DatasetMooncake, DatasetBailian)
	}
	return nil
}

// normalizeSizes checks the prompt count and lengths and fills their defaults.
func (o *Options) normalizeSizes() error {
	if o.NumPrompts < 0 {
		return usageErr("num-prompts", "must be at least 1")
	}
	if err := o.checkTraffic(); err != nil {
		return err
	}
	if o.NumPrompts == 0 && !isTrace(o.Dataset) {
		o.NumPrompts = DefaultNumPrompts
	}
	if o.InputLen < 0 {
		return usageErr("input-len", "must be positive")
	}
	if o.OutputLen < 0 {
		return usageErr("output-len", "must be positive")
	}
	if o.Dataset == "random" {
		if o.InputLen == 0 {
			o.InputLen = DefaultInputLen
		}
		if o.OutputLen == 0 {
			o.OutputLen = DefaultOutputLen
		}
	}
	return nil
}

// normalizeArrivals checks the request rate and burstiness and fills their defaults.
func (o *Options) normalizeArrivals() error {
	rate := float64(o.RequestRate)
	switch {
	case isTrace(o.Dataset) && rate != 0 && !math.IsInf(rate, 1):
		return usageErr("request-rate", "a trace sends each request at its timestamp; speed it up or slow it down with --trace-time-scale")
	case rate == 0:
		o.RequestRate = result.Inf
	case math.IsNaN(rate) || rate < 0:
		return usageErr("request-rate", "want a positive number of requests/s or inf")
	}
	switch {
	case o.Burstiness == 0:
		o.Burstiness = 1
	case math.IsNaN(o.Burstiness) || o.Burstiness < 0:
		return usageErr("burstiness", "must be positive (1 is a Poisson process)")
	}
	return nil
}

// normalizeTrace checks the trace replay options and fills their defaults.
func (o *Options) normalizeTrace() error {
	switch {
	case o.TraceTimeScale == 0:
		o.TraceTimeScale = 1
	case !(o.TraceTimeScale > 0) || math.IsInf(o.TraceTimeScale, 1):
		return usageErr("trace-time-scale", "must be a positive factor (0.5 replays twice as fast)")
	}
	switch o.TraceOverlong {
	case "":
		o.TraceOverlong = OverlongSkip
	case OverlongSkip, OverlongTruncate, OverlongFail:
	default:
		return usageErr("trace-overlong", "%q: want %s, %s or %s", o.TraceOverlong, OverlongSkip, OverlongTruncate, OverlongFail)
	}
	if o.TraceBlockSize < 0 {
		return usageErr("trace-block-size", "must be positive")
	}
	if o.TraceBlockSize == 0 {
		_, o.TraceBlockSize = traceFormat(o.Dataset)
	}
	return nil
}

// normalizeLimits checks the concurrency, timeouts and self-check limits and fills their defaults.
func (o *Options) normalizeLimits() error {
	if o.MaxConcurrency < 0 {
		return usageErr("max-concurrency", "must be positive, or 0 for no cap")
	}
	if o.Warmup < 0 {
		return usageErr("warmup", "must be 0 or more")
	}
	if o.Temperature < 0 || math.IsNaN(o.Temperature) {
		return usageErr("temperature", "must be 0 or more")
	}
	for _, d := range []struct {
		flag string
		v    *time.Duration
		def  time.Duration
	}{
		{"timeout", &o.Timeout, DefaultTimeout},
		{"request-timeout", &o.RequestTimeout, DefaultRequestTimeout},
		{"ready-check-timeout-sec", &o.ReadyTimeout, 0},
	} {
		if *d.v < 0 {
			return usageErr(d.flag, "must be positive")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxLineBytes < 0 {
		return usageErr("max-line-bytes", "must be positive")
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	switch {
	case o.MaxErrorRate == 0:
		o.MaxErrorRate = DefaultMaxErrorRate
	case !(o.MaxErrorRate > 0 && o.MaxErrorRate <= 1):
		return usageErr("max-error-rate", "must be a fraction in (0, 1]; 1 accepts any number of failures")
	}
	if o.MaxClientCPU < 0 || o.MaxScheduleLag < 0 || o.MaxTTFTGap < 0 {
		return usageErr("max-client-cpu", "self-check limits must be positive")
	}
	return nil
}

// normalizeMetrics checks the goodput SLOs and percentiles.
func (o *Options) normalizeMetrics() error {
	for k, v := range o.Goodput {
		if k != "ttft" && k != "tpot" && k != "e2el" {
			return usageErr("goodput", "unknown metric %q: want ttft, tpot or e2el", k)
		}
		if v < 0 || math.IsNaN(v) {
			return usageErr("goodput", "%s:%v: an SLO is a non-negative number of ms", k, v)
		}
	}
	if o.Percentiles == nil {
		o.Percentiles = DefaultPercentiles
	}
	for _, p := range o.Percentiles {
		if !(p > 0 && p <= 100) {
			return usageErr("percentiles", "%v: each must be in (0, 100]", p)
		}
	}
	return nil
}

// normalizeEndpoint reconciles --endpoint with vLLM's --backend: either
// picks the other, and the two must agree.
func (o *Options) normalizeEndpoint() error {
	switch o.Endpoint {
	case "", EndpointChat, EndpointCompletions, EndpointOllama:
	default:
		return usageErr("endpoint", "%q: want %s, %s or %s (Ollama's native API)", o.Endpoint, EndpointChat, EndpointCompletions, EndpointOllama)
	}
	if o.Endpoint == EndpointOllama && o.Backend == "" {
		o.Backend = "ollama"
	}
	switch o.Backend {
	case "":
		if o.Endpoint == "" {
			o.Endpoint = EndpointChat
		}
		o.Backend = "openai-chat"
		if o.Endpoint == EndpointCompletions {
			o.Backend = "openai"
		}
	case "ollama":
		if o.Endpoint == "" {
			o.Endpoint = EndpointOllama
		}
		if o.Endpoint != EndpointOllama {
			return usageErr("backend", "ollama speaks %s, not %s", EndpointOllama, o.Endpoint)
		}
	case "openai-chat":
		if o.Endpoint == "" {
			o.Endpoint = EndpointChat
		}
		if o.Endpoint != EndpointChat {
			return usageErr("backend", "openai-chat speaks %s, not %s", EndpointChat, o.Endpoint)
		}
	case "openai", "vllm":
		if o.Endpoint == "" {
			o.Endpoint = EndpointCompletions
		}
		if o.Endpoint != EndpointCompletions {
			return usageErr("backend", "%s speaks %s, not %s; use --backend openai-chat", o.Backend, EndpointCompletions, o.Endpoint)
		}
	default:
		return usageErr("backend", "%q: perfgate speaks openai-chat, openai and vllm (OpenAI-compatible text generation) and ollama (Ollama's native API)", o.Backend)
	}
	return nil
}

// ParseGoodput reads vLLM's --goodput form, "ttft:MS tpot:MS e2el:MS".
func ParseGoodput(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, pair := range strings.Fields(s) {
		name, val, ok := strings.Cut(pair, ":")
		var v float64
		if ok {
			_, err := fmt.Sscanf(val, "%g", &v)
			ok = err == nil
		}
		if !ok {
			return nil, fmt.Errorf("%q: want KEY:VALUE pairs such as \"ttft:500 tpot:50\", values in ms", pair)
		}
		if name != "ttft" && name != "tpot" && name != "e2el" {
			return nil, fmt.Errorf("%q: unknown metric %q, want ttft, tpot or e2el", pair, name)
		}
		out[name] = v
	}
	return out, nil
}

// defaultClient keeps one idle connection per concurrent request, so the
// measured phase reuses warm connections instead of dialling under load.
func defaultClient(o *Options) *http.Client {
	conns := o.MaxConcurrency
	if conns == 0 {
		conns = o.NumPrompts + o.Warmup
	}
	dialTimeout := min(o.Timeout, 30*time.Second)
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil, // a benchmark measures the engine, not a proxy
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// Requests are small JSON bodies, and a larger one is written
		// straight through; the default 4 KiB write buffer per connection
		// would be a fifth of an open stream's memory.
		WriteBufferSize: 1024,
	}}
}

// runPhase sends reqs at their offsets from the phase start (nil: all at
// once), at most conc at a time (0: no cap), and waits for them all. Each
// record notes when its request was due (its offset had come and a slot
// was free) for the self-check. The duration runs from the first send to
// the last answer, as vLLM's does.
func runPhase(ctx context.Context, q *requester, reqs []request, offsets []time.Duration, conc int, done func()) ([]record, time.Duration) {
	recs := make([]record, len(reqs))
	// A slot holds the instant it was last freed, so a request that waited
	// for one is due from then, and the dispatcher's own wake-up delay
	// counts as lag.
	var slots chan time.Time
	if conc > 0 {
		slots = make(chan time.Time, conc)
		for range conc {
			slots <- time.Time{}
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	var timer *time.Timer
dispatch:
	for i := range reqs {
		due := start
		if offsets != nil {
			due = start.Add(offsets[i])
			if wait := time.Until(due); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					break dispatch
				case <-timer.C:
				}
			}
		}
		if slots != nil {
			select {
			case freed := <-slots:
				if freed.After(due) {
					due = freed
				}
			case <-ctx.Done():
				break dispatch
			}
		}
		recs[i].due = due
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			q.do(ctx, reqs[i], &recs[i])
			if slots != nil {
				slots <- time.Now()
			}
			if done != nil {
				done()
			}
		}(i)
	}
	wg.Wait()
	if timer != nil {
		timer.Stop()
	}
	return recs, time.Since(start)
}

// maxWarmConns bounds the connections opened ahead of the measured phase.
const maxWarmConns = 512

// warmConnections opens about as many connections as the measured phase
// will hold open at once (conc, or every request when there is no cap),
// by sending that many GET /v1/models at once: each one that finds no
// idle connection dials its own, and all are left idle for the run. A
// failure is of no consequence: the run dials what it lacks.
func warmConnections(ctx context.Context, client *http.Client, target, apiKey string, n, conc int, timeout time.Duration) {
	if conc > 0 {
		n = min(n, conc)
	}
	if n <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, min(timeout, 10*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/v1/models", nil)
			if err != nil {
				return
			}
			if apiKey != "" {
				req.Header.Set("Authorization", "Bearer "+apiKey)
			}
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}()
	}
	wg.Wait()
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func toolName() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "perfgate bench " + v
}

// engineFailures are the requests the engine ended itself, by prompt:
// request i sent prompt i of the measured set. A session's turns are not
// prompts of the set: none is named.
func engineFailures(recs []record, sessions bool) []result.EngineFailure {
	if sessions {
		return nil
	}
	var out []result.EngineFailure
	for i := range recs {
		if words, ok := recs[i].engineFailure(); ok {
			out = append(out, result.EngineFailure{Prompt: i, Tokens: recs[i].chunks, Words: words})
		}
	}
	return out
}

// sortedErrors lists distinct error messages, most frequent first.
func sortedErrors(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if counts[keys[a]] != counts[keys[b]] {
			return counts[keys[a]] > counts[keys[b]]
		}
		return keys[a] < keys[b]
	})
	return keys
}
