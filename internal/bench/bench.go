// Package bench is perfgate's benchmark client, the equal of
// `vllm bench serve`: it sends a dataset of prompts to an OpenAI-compatible
// engine at a chosen arrival rate and concurrency, times each streamed
// answer and aggregates the timings into vLLM's result keys.
//
// The data flow reads top-down as in vLLM's client: a request function
// (request.go) → one record per request → aggregate (metrics.go) → the
// result. Metric definitions and key names follow vllm/benchmarks/serve.py
// so a perfgate result and a vLLM result compare number for number.
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

	"github.com/perfgate/perfgate/internal/result"
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
)

// DefaultPercentiles are the percentiles reported when none are asked for.
// vLLM reports only p99 by default; a gate needs the spread too.
var DefaultPercentiles = []float64{50, 90, 95, 99}

// Options says what load to offer and where.
type Options struct {
	// Target is the engine's base URL, e.g. http://127.0.0.1:8000.
	Target string
	// Endpoint is EndpointChat (default) or EndpointCompletions.
	Endpoint string
	// Model is sent in each request; "" asks GET /v1/models and takes the first.
	Model string
	// Dataset is "random" (default), "sharegpt" or "jsonl"; the last two
	// read DatasetPath.
	Dataset, DatasetPath string
	// InputLen is the random dataset's prompt length in tokens. OutputLen
	// is max_tokens: fixed for random, an override for sharegpt and jsonl.
	InputLen, OutputLen int
	// NumPrompts is the number of measured requests.
	NumPrompts int
	// RequestRate is the mean arrival rate in requests/s; 0 or result.Inf
	// sends everything at once.
	RequestRate result.Rate
	// Burstiness is the gamma shape of inter-arrival times: 1 (default) is
	// a Poisson process, below 1 burstier, above 1 more even.
	Burstiness float64
	// MaxConcurrency caps requests in flight; 0 is no cap.
	MaxConcurrency int
	// Warmup requests are sent first, with prompts of their own, and discarded.
	Warmup int
	Seed   int64
	// Temperature is sent in every request (0: greedy).
	Temperature float64
	// Timeout is how long one request may wait for the response to start or
	// for its next stream line before it fails; 0 is DefaultTimeout.
	Timeout time.Duration
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
	// counting measured requests from 0); "" picks a random one.
	RunID string
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
// in the result, never returned as an error; Run errs only on bad options
// (a *UsageError), when the target never answered at all, or when ctx ends
// first.
func Run(ctx context.Context, o Options) (*result.Result, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	target := strings.TrimRight(o.Target, "/")
	client := o.Client
	if client == nil {
		client = defaultClient(&o)
	}

	model, err := preflight(ctx, client, target, o.Model, o.Timeout)
	if err != nil {
		return nil, err
	}

	// Separate streams so the arrival schedule does not shift when the
	// dataset changes size, and vice versa.
	dataRNG := mrand.New(mrand.NewPCG(uint64(o.Seed), 0x5eed_da7a))
	arrivalRNG := mrand.New(mrand.NewPCG(uint64(o.Seed), 0x5eed_a771))
	measured, warmup, err := loadSamples(&o, dataRNG)
	if err != nil {
		return nil, usageErr("dataset-path", "%v", err)
	}
	runID := o.RunID
	if runID == "" {
		runID = newRunID()
	}

	q := &requester{
		client:      client,
		url:         target + o.Endpoint,
		chat:        o.Endpoint == EndpointChat,
		model:       model,
		temperature: o.Temperature,
		ignoreEOS:   o.Dataset == "random", // as vLLM: random prompts run to max_tokens
		timeout:     o.Timeout,
	}

	startedAt := time.Now().UTC()
	if len(warmup) > 0 {
		reqs := make([]request, len(warmup))
		for i, s := range warmup {
			reqs[i] = request{id: fmt.Sprintf("%s-warmup-%d", runID, i), prompt: s.prompt, promptLen: s.promptLen, maxTokens: s.maxTokens}
		}
		runPhase(ctx, q, reqs, nil, o.MaxConcurrency, nil)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("benchmark interrupted during warmup: %w", err)
		}
	}

	reqs := make([]request, len(measured))
	for i, s := range measured {
		reqs[i] = request{id: fmt.Sprintf("%s-%d", runID, i), prompt: s.prompt, promptLen: s.promptLen, maxTokens: s.maxTokens}
	}
	offsets := arrivalOffsets(len(reqs), float64(o.RequestRate), o.Burstiness, arrivalRNG)
	bar := newProgress(o.Progress, len(reqs))
	recs, dur := runPhase(ctx, q, reqs, offsets, o.MaxConcurrency, bar.add)
	bar.finish()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("benchmark interrupted: %w", err)
	}
	if neverAnswered(recs) {
		return nil, fmt.Errorf("target %s never answered: %s", target, recs[0].err)
	}

	r := aggregate(recs, dur, o.Percentiles, o.Goodput)
	r.Date = startedAt.Local().Format("20060102-150405") // vLLM's format
	r.Backend = "openai-chat"
	if o.Endpoint == EndpointCompletions {
		r.Backend = "openai"
	}
	r.ModelID = model
	r.TokenizerID = "whitespace" // tokenize.Count: one word, one token
	r.NumPrompts = o.NumPrompts
	r.RequestRate = o.RequestRate
	r.Burstiness = o.Burstiness
	if o.MaxConcurrency > 0 {
		c := o.MaxConcurrency
		r.MaxConcurrency = &c
	}
	// vLLM writes --metadata pairs as top-level keys; keep that, and keep
	// them in perfgate's section where they cannot collide with a metric.
	for k, v := range o.Metadata {
		if r.Extra == nil {
			r.Extra = map[string]json.RawMessage{}
		}
		b, _ := json.Marshal(v)
		r.Extra[k] = b
	}
	sec := r.Perfgate
	sec.SchemaVersion = result.SchemaVersion
	sec.Tool = toolName()
	sec.StartedAt = startedAt.Format(time.RFC3339Nano)
	sec.Load = result.Load{
		Endpoint:       o.Endpoint,
		Model:          model,
		Dataset:        o.Dataset,
		NumPrompts:     o.NumPrompts,
		InputLen:       o.InputLen,
		OutputLen:      o.OutputLen,
		RequestRate:    o.RequestRate,
		Burstiness:     o.Burstiness,
		MaxConcurrency: o.MaxConcurrency,
		Seed:           o.Seed,
		Temperature:    o.Temperature,
	}
	sec.DatasetHash = datasetHash(measured)
	if len(o.Metadata) > 0 {
		sec.Metadata = o.Metadata
	}
	sec.Warmup = o.Warmup
	return r, nil
}

// normalize fills defaults and rejects bad options.
func (o *Options) normalize() error {
	if o.Target == "" {
		return usageErr("target", "required: the engine's base URL, e.g. http://127.0.0.1:8000")
	}
	u, err := url.Parse(o.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("target", "%q is not an http(s) URL such as http://127.0.0.1:8000", o.Target)
	}
	switch o.Endpoint {
	case "":
		o.Endpoint = EndpointChat
	case EndpointChat, EndpointCompletions:
	default:
		return usageErr("endpoint", "%q: want %s or %s", o.Endpoint, EndpointChat, EndpointCompletions)
	}
	switch o.Dataset {
	case "":
		o.Dataset = "random"
		fallthrough
	case "random":
		if o.DatasetPath != "" {
			return usageErr("dataset-path", "the random dataset takes no file; use --dataset sharegpt or jsonl")
		}
	case "sharegpt", "jsonl":
		if o.DatasetPath == "" {
			return usageErr("dataset-path", "required with --dataset %s", o.Dataset)
		}
	default:
		return usageErr("dataset", "%q: want random, sharegpt or jsonl", o.Dataset)
	}
	if o.NumPrompts < 0 {
		return usageErr("num-prompts", "must be positive")
	}
	if o.NumPrompts == 0 {
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
	rate := float64(o.RequestRate)
	switch {
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
	if o.MaxConcurrency < 0 {
		return usageErr("max-concurrency", "must be positive, or 0 for no cap")
	}
	if o.Warmup < 0 {
		return usageErr("warmup", "must be 0 or more")
	}
	if o.Temperature < 0 || math.IsNaN(o.Temperature) {
		return usageErr("temperature", "must be 0 or more")
	}
	if o.Timeout < 0 {
		return usageErr("timeout", "must be positive")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
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

// preflight checks the target answers at all and resolves the model name.
// Any HTTP answer counts as answering; only with no model given must
// /v1/models work.
func preflight(ctx context.Context, client *http.Client, target, model string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(timeout, 30*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/v1/models", nil)
	if err != nil {
		return "", usageErr("target", "%v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return "", fmt.Errorf("target %s never answered: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if model != "" {
		return model, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg := errorMessage(body)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return "", fmt.Errorf("list models at %s/v1/models: HTTP %d: %s; pass --model", target, resp.StatusCode, msg)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("list models at %s/v1/models: no model in the answer; pass --model", target)
	}
	return list.Data[0].ID, nil
}

// runPhase sends reqs at their offsets from the phase start (nil: all at
// once), at most conc at a time (0: no cap), and waits for them all. The
// duration runs from the first send to the last answer, as vLLM's does.
func runPhase(ctx context.Context, q *requester, reqs []request, offsets []time.Duration, conc int, done func()) ([]record, time.Duration) {
	recs := make([]record, len(reqs))
	var sem chan struct{}
	if conc > 0 {
		sem = make(chan struct{}, conc)
	}
	var wg sync.WaitGroup
	start := time.Now()
	var timer *time.Timer
dispatch:
	for i := range reqs {
		if offsets != nil {
			if wait := offsets[i] - time.Since(start); wait > 0 {
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
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break dispatch
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			q.do(ctx, reqs[i], &recs[i])
			if sem != nil {
				<-sem
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

// neverAnswered is true when every request failed to connect.
func neverAnswered(recs []record) bool {
	if len(recs) == 0 {
		return false
	}
	for i := range recs {
		if !recs[i].connErr {
			return false
		}
	}
	return true
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
