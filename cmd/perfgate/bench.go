package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/sim"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

func init() {
	register("bench", command{summary: "benchmark an OpenAI-compatible engine, like vllm bench serve (--sim: the built-in one)", run: runBench})
}

// Defaults for --sim, sized so the first run finishes in seconds.
const (
	simNumPrompts     = 200
	simInputLen       = 128
	simOutputLen      = 64
	simMaxConcurrency = 32
)

// vllmAliases maps `vllm bench serve`'s flag names to perfgate's, so an
// existing vLLM command line runs with only the program name changed.
var vllmAliases = map[string]string{
	"base-url":            "target",
	"dataset-name":        "dataset",
	"random-input-len":    "input-len",
	"random-output-len":   "output-len",
	"sharegpt-output-len": "output-len",
	"custom-output-len":   "output-len",
	"num-warmups":         "warmup",
	"metric-percentiles":  "percentiles",
}

// vllmIgnored are vLLM flags that change nothing here: perfgate always
// reports every metric and per-request array, and counts tokens with the
// server's own /tokenize rather than a local Hugging Face tokenizer.
var vllmIgnored = []struct{ name, why string }{
	{"percentile-metrics", "perfgate reports percentiles of ttft, tpot, itl and e2el always"},
	{"tokenizer", "perfgate counts tokens with the server's /tokenize"},
	{"tokenizer-mode", "perfgate counts tokens with the server's /tokenize"},
}

func runBench(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("bench", "(--target URL | --sim) [flags]")
	fs.epilog = "A `vllm bench serve` command line works with the program name replaced: vLLM's flag names are accepted.\n" +
		"OPENAI_API_KEY, when set, is sent as a bearer token, as vLLM's client does.\n"
	var o bench.Options
	f := benchFlagsOn(fs, &o)
	if code, ok := fs.parse(expandMultiValueFlags(args, "metadata", "goodput")); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate bench: "+format+"\n", a...)
		return 3
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	f.set = setFlags(fs)
	if err := f.options(&o); err != nil {
		return usage("%v", err)
	}
	if *f.useSim {
		if err := f.simOptions(&o); err != nil {
			return usage("%v", err)
		}
		target, stop, err := startBenchSim(ctx, *f.simSlowdown, o.Traffic)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate bench: start sim: %v\n", err)
			return 1
		}
		defer stop()
		o.Target = target
		o.CPUShared = true // the engine runs in this process
	} else if o.Target == "" {
		return usage("--target: required (the engine's base URL, e.g. http://127.0.0.1:8000), or pass --sim")
	}
	o.APIKey = os.Getenv("OPENAI_API_KEY") // as vLLM's client
	if !*f.disableTqdm {
		o.Progress = env.stderr
	}

	env.log.Info().Str("target", o.Target).Str("endpoint", o.Endpoint).Str("dataset", o.Dataset).
		Int("num_prompts", o.NumPrompts).Str("request_rate", o.RequestRate.String()).
		Int("max_concurrency", o.MaxConcurrency).Msg("benchmark starting")
	res, err := bench.Run(ctx, o)
	if err != nil {
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			return usage("%v", err)
		}
		fmt.Fprintf(env.stderr, "perfgate bench: %v\n", err)
		return 1
	}
	if *f.useSim {
		res.Perfgate.Environment.Sim = true
		res.Perfgate.Environment.EngineImage = "perfgate sim" // the slowdown is what a comparison measures, not the engine's identity
	}
	return f.report(env, res, o)
}

// benchFlags holds the flags of `perfgate bench` that are not bench.Options
// fields themselves, and which were set.
type benchFlags struct {
	host, servedName, rate, output, resultFile, resultDir, idPrefix, percentiles *string
	port, readySecs                                                              *int
	saveResult, appendResult, disableTqdm, useSim                                *bool
	simSlowdown                                                                  *float64
	goodput                                                                      []string
	metadata                                                                     metadataFlag
	traffic                                                                      func() (*result.Traffic, error)
	set                                                                          map[string]bool
}

// benchFlagsOn defines the flags of `perfgate bench` on fs, the options'
// own into o.
func benchFlagsOn(fs *flagSet, o *bench.Options) *benchFlags {
	f := &benchFlags{}
	fs.StringVar(&o.Target, "target", "", "engine base URL, e.g. http://127.0.0.1:8000 (vLLM: --base-url, or --host and --port)")
	f.host = fs.String("host", "", "vLLM's --host: with --port, the target http://HOST:PORT")
	f.port = fs.Int("port", 0, "vLLM's --port (default 8000 when --host is given)")
	fs.StringVar(&o.Endpoint, "endpoint", bench.EndpointCompletions, "API endpoint: "+bench.EndpointCompletions+" (the default, as in .github/perfgate.yml and vLLM), "+bench.EndpointChat+" or "+bench.EndpointOllama+" (Ollama's native API: the result sets Ollama's own timings of each request beside the client's); --backend openai-chat or ollama picks the endpoint")
	fs.StringVar(&o.Backend, "backend", "", "vLLM's request function: openai (the default), vllm or openai-chat, or ollama (Ollama's native "+bench.EndpointOllama+"); picks the endpoint when --endpoint is not given")
	fs.StringVar(&o.Label, "label", "", "label recorded in the result (and the --save-result file name)")
	fs.StringVar(&o.Model, "model", "", "model name to request (default: the first of GET /v1/models)")
	f.servedName = fs.String("served-model-name", "", "vLLM's --served-model-name: the model name sent, when it differs from --model")
	fs.StringVar(&o.Dataset, "dataset", "random", "dataset: random, sharegpt, jsonl (vLLM: custom), or a trace: timed_trace, mooncake, bailian")
	fs.StringVar(&o.DatasetPath, "dataset-path", "", "dataset file: ShareGPT JSON; JSONL of {\"prompt\":…,\"output_len\":N}; or a trace's JSONL rows {\"timestamp\",\"input_length\",\"output_length\",\"hash_ids\"}")
	fs.IntVar(&o.InputLen, "input-len", 0, fmt.Sprintf("prompt tokens per request for the random dataset (default %d; %d with --sim)", bench.DefaultInputLen, simInputLen))
	fs.IntVar(&o.OutputLen, "output-len", 0, fmt.Sprintf("max_tokens per request; for other datasets it overrides theirs (random default %d; %d with --sim)", bench.DefaultOutputLen, simOutputLen))
	fs.IntVar(&o.NumPrompts, "num-prompts", bench.DefaultNumPrompts, fmt.Sprintf("measured requests (%d with --sim; a trace's rows when not given)", simNumPrompts))
	f.rate = fs.String("request-rate", "inf", "mean requests/s, or inf to send all at once")
	fs.Float64Var(&o.Burstiness, "burstiness", 1, "gamma shape of inter-arrival times: 1 is Poisson, <1 burstier, >1 more even")
	fs.Float64Var(&o.TraceTimeScale, "trace-time-scale", 1, "multiply a trace's timestamps (0.5 replays it twice as fast)")
	fs.StringVar(&o.TraceOverlong, "trace-overlong", bench.OverlongSkip, "trace rows whose prompt + output do not fit the model's max_model_len: skip (leave out, counted in the result's warnings), truncate (cut the prompt to fit) or fail")
	fs.IntVar(&o.TraceBlockSize, "trace-block-size", 0, "tokens per trace hash id (default 512 for mooncake and timed_trace, 16 for bailian)")
	fs.IntVar(&o.MaxConcurrency, "max-concurrency", 0, fmt.Sprintf("cap on requests in flight, 0 for none (%d with --sim)", simMaxConcurrency))
	fs.IntVar(&o.Warmup, "warmup", 0, "warm-up requests sent first and discarded")
	fs.Int64Var(&o.Seed, "seed", 0, "seed for the dataset sample and the arrival times")
	fs.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature sent with each request")
	fs.BoolVar(&o.IgnoreEOS, "ignore-eos", false, "ask for max_tokens whatever is sampled (always on for random and traces)")
	fs.StringVar(&o.CacheSalt, "cache-salt", "", "send as every request's cache_salt, so prompts an earlier run left in the prefix cache are not reused")
	fs.BoolVar(&o.NoStream, "no-stream", false, "send non-streaming requests (TTFT is then the whole answer's time)")
	fs.DurationVar(&o.Timeout, "timeout", bench.DefaultTimeout, "per request: the longest wait for the response or its next stream line")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", bench.DefaultRequestTimeout, "per request: the longest it may take in all, tokens flowing or not")
	f.readySecs = fs.Int("ready-check-timeout-sec", 0, "retry the first request this many seconds while the engine is not ready (0: three tries)")
	fs.IntVar(&o.MaxLineBytes, "max-line-bytes", bench.DefaultMaxLineBytes, "longest SSE line (or non-streamed answer) a request may send")
	fs.DurationVar(&o.MaxTTFTGap, "max-ttft-gap", bench.DefaultMaxTTFTGap, "self-check: how far the client's mean TTFT may sit above the engine's own (its /metrics) before the run is marked client-bound; the limit is this or 5% of the engine's TTFT, whichever is larger (raise it for an engine across a network)")
	fs.Float64Var(&o.MaxErrorRate, "max-error-rate", bench.DefaultMaxErrorRate, "fraction of failed requests above which the run exits 1 (its result is still written, marked)")
	fs.Func("goodput", `SLOs for goodput in ms, e.g. "ttft:500 tpot:50 e2el:10000" (repeatable, or several after one flag)`, func(s string) error {
		f.goodput = append(f.goodput, s)
		return nil
	})
	fs.Var(&f.metadata, "metadata", "KEY=VALUE recorded with the result (repeatable, or several after one flag)")
	f.output = fs.String("output", "", "write the result JSON (vLLM's keys plus a perfgate section) to this file")
	f.saveResult = fs.Bool("save-result", false, "vLLM's --save-result: write the result to {label}-{rate}qps[-concurrency{N}]-{model}-{date}.json")
	f.appendResult = fs.Bool("append-result", false, "append the result as one JSON line (to --output, or the --save-result file name)")
	f.resultFile = fs.String("result-filename", "", "with --save-result: the file name")
	f.resultDir = fs.String("result-dir", "", "with --save-result: the directory (made if missing)")
	fs.StringVar(&o.RunID, "run-id", "", "prefix of each request's X-Request-Id (\"<run-id>-<index>\"), recorded in the result (default: random)")
	f.idPrefix = fs.String("request-id-prefix", "", "vLLM's request id prefix: the same as --run-id")
	f.percentiles = fs.String("percentiles", "50,90,95,99", "comma-separated percentiles to report")
	f.disableTqdm = fs.Bool("disable-tqdm", false, "no progress bar")
	fs.Bool("trust-remote-code", false, "accepted for vLLM command lines; perfgate loads no model code")
	fs.BoolVar(&o.SaveTexts, "save-detailed", false, "vLLM's --save-detailed: also keep each request's generated text (generated_texts); perfgate always writes the per-request timing arrays")
	for _, ig := range vllmIgnored {
		fs.String(ig.name, "", "accepted for vLLM command lines; "+ig.why)
	}
	f.traffic = trafficFlags(fs)
	f.useSim = fs.Bool("sim", false, "start the built-in simulated engine on 127.0.0.1 and benchmark it")
	f.simSlowdown = fs.Float64("sim-slowdown", 1, "with --sim: multiply the engine's step times (1.2 = a 20% regression)")
	for alias, of := range vllmAliases {
		fs.Var(fs.Lookup(of).Value, alias, "vLLM's name for --"+of)
	}
	return f
}

// setFlags is the flags given on the command line, a vLLM alias counting
// as the flag it names.
func setFlags(fs *flagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if of, ok := vllmAliases[f.Name]; ok {
			set[of] = true
		}
	})
	return set
}

// options completes o from the flags that are not its fields (the rate,
// goodput, percentiles, metadata) and checks what the flags say together;
// an error is a usage error.
func (f *benchFlags) options(o *bench.Options) error {
	// The default is vLLM's (and .github/perfgate.yml's): the openai
	// backend on /v1/completions; --backend openai-chat alone picks chat.
	if !f.set["endpoint"] {
		o.Endpoint = ""
		if o.Backend == "" {
			o.Backend = "openai"
		}
	}

	var err error
	if o.Traffic, err = f.traffic(); err != nil {
		return err
	}
	if o.RequestRate, err = result.ParseRate(*f.rate); err != nil {
		return fmt.Errorf("--request-rate: %w", err)
	}
	if isTraceDataset(o.Dataset) && !f.set["request-rate"] {
		o.RequestRate = 0 // a trace times itself
	}
	if o.Goodput, err = bench.ParseGoodput(strings.Join(f.goodput, " ")); err != nil {
		return fmt.Errorf("--goodput: %w", err)
	}
	if len(o.Goodput) == 0 {
		o.Goodput = nil
	}
	if o.Percentiles, err = parsePercentiles(*f.percentiles); err != nil {
		return fmt.Errorf("--percentiles: %w", err)
	}
	if len(f.metadata) > 0 {
		o.Metadata = f.metadata
	}
	if o.Dataset == "custom" { // vLLM's name for a JSONL of prompts
		o.Dataset = "jsonl"
	}
	return f.combinations(o)
}

// combinations checks the flags that depend on one another (the prompt
// count and the dataset, the request id and the run id, the result file's
// flags, the engine's address) and completes o from them.
func (f *benchFlags) combinations(o *bench.Options) error {
	if f.set["num-prompts"] && o.NumPrompts == 0 {
		// The library reads 0 as "the default" (or a trace's every row);
		// on the command line it is a mistake, not a request for 1,000.
		return errors.New("--num-prompts: must be at least 1 (with a trace, leave it out to replay every row)")
	}
	if isTraceDataset(o.Dataset) && !f.set["num-prompts"] {
		o.NumPrompts = 0
	}
	if *f.servedName != "" {
		o.Model = *f.servedName
	}
	if *f.idPrefix != "" {
		if f.set["run-id"] {
			return errors.New("--request-id-prefix and --run-id are the same setting: pass one")
		}
		o.RunID = strings.TrimRight(*f.idPrefix, "-")
	}
	if *f.readySecs < 0 {
		return errors.New("--ready-check-timeout-sec: must be 0 or more")
	}
	o.ReadyTimeout = time.Duration(*f.readySecs) * time.Second
	if !(o.MaxErrorRate > 0 && o.MaxErrorRate <= 1) {
		return errors.New("--max-error-rate: want a fraction in (0, 1], e.g. 0.05; 1 accepts any failures")
	}
	if *f.resultFile != "" || *f.resultDir != "" {
		if !*f.saveResult && !*f.appendResult {
			return errors.New("--result-filename and --result-dir name the --save-result file: add --save-result")
		}
		if *f.output != "" {
			return errors.New("--output names the file itself: drop --result-filename and --result-dir, or --output")
		}
	}
	if f.set["host"] || f.set["port"] {
		if o.Target != "" {
			return errors.New("--host/--port and --target (or --base-url) both name the engine: pass one")
		}
		h, p := *f.host, *f.port
		if h == "" {
			h = "127.0.0.1" // vLLM's default
		}
		if p == 0 {
			p = 8000
		}
		o.Target = "http://" + net.JoinHostPort(h, strconv.Itoa(p))
	}
	if f.set["sim-slowdown"] && !*f.useSim {
		return errors.New("--sim-slowdown needs --sim")
	}
	return nil
}

// simOptions checks --sim's flags and gives the options --sim's defaults
// where the command line left them.
func (f *benchFlags) simOptions(o *bench.Options) error {
	if o.Target != "" {
		return errors.New("--target and --sim are exclusive: --sim benchmarks the built-in engine")
	}
	if !(*f.simSlowdown > 0) {
		return errors.New("--sim-slowdown: must be > 0 (1 = none)")
	}
	for _, d := range []struct {
		flag string
		v    *int
		def  int
	}{
		{"num-prompts", &o.NumPrompts, simNumPrompts},
		{"input-len", &o.InputLen, simInputLen},
		{"output-len", &o.OutputLen, simOutputLen},
		{"max-concurrency", &o.MaxConcurrency, simMaxConcurrency},
	} {
		// A trace says its own prompt lengths, row count and pace.
		if !f.set[d.flag] && !(isTraceDataset(o.Dataset) && d.flag != "output-len") {
			*d.v = d.def
		}
	}
	return nil
}

// report prints the summary, writes the result file and says whether the
// run failed.
func (f *benchFlags) report(env *cliEnv, res *result.Result, o bench.Options) int {
	bench.WriteSummary(env.stdout, res)

	path := *f.output
	if path == "" && (*f.saveResult || *f.appendResult) {
		path = vllmResultName(res, o, *f.resultFile, *f.resultDir)
		if *f.resultDir != "" {
			if err := os.MkdirAll(*f.resultDir, 0o755); err != nil {
				fmt.Fprintf(env.stderr, "perfgate bench: result dir: %v\n", err)
				return 1
			}
		}
	}
	if path != "" {
		write := res.WriteFile
		if *f.appendResult {
			write = res.AppendFile
		}
		if err := write(path); err != nil {
			fmt.Fprintf(env.stderr, "perfgate bench: %v\n", err)
			return 1
		}
		env.log.Info().Str("file", path).Bool("appended", *f.appendResult).Msg("result written")
	}
	if c := res.Perfgate.Client; c != nil && c.ClientBound {
		env.log.Warn().Str("reason", c.Reason).Msg("the client was the bottleneck: the gate will not use this run")
	}
	if why, bound := res.TPOTDeliveryBound(); bound {
		env.log.Warn().Str("reason", why).Msg("TPOT and ITL are delivery-bound: tokens arrived in bursts")
	}
	if sec := res.Perfgate; sec.ErrorRateExceeded {
		fmt.Fprintf(env.stderr, "perfgate bench: %d of %d requests failed (%.1f%% > --max-error-rate %.1f%%); most common: %s\n",
			res.Failed, res.Failed+res.Completed, 100*sec.ErrorRate, 100*sec.MaxErrorRate, mostCommon(sec.ErrorCounts))
		return 1
	}
	return 0
}

func isTraceDataset(name string) bool {
	return name == bench.DatasetTimedTrace || name == bench.DatasetMooncake || name == bench.DatasetBailian
}

// vllmResultName is the file --save-result writes, named as vLLM names it:
// {label}-{rate}qps[-concurrency{N}]-{model}-{date}.json, where the label
// defaults to the backend and the rate is Python's float ("inf", "10.0").
func vllmResultName(r *result.Result, o bench.Options, name, dir string) string {
	if name == "" {
		label := o.Label
		if label == "" {
			label = r.Backend
		}
		conc := ""
		if o.MaxConcurrency > 0 {
			conc = fmt.Sprintf("-concurrency%d", o.MaxConcurrency)
		}
		model := r.ModelID[strings.LastIndex(r.ModelID, "/")+1:]
		name = fmt.Sprintf("%s-%sqps%s-%s-%s.json", label, pythonFloat(float64(r.RequestRate)), conc, model, r.Date)
	}
	if dir != "" {
		name = filepath.Join(dir, name)
	}
	return name
}

// pythonFloat prints a float as Python's str() does for the usual rates.
func pythonFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e16:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
}

func mostCommon(counts map[string]int) string {
	best, n := "", 0
	for msg, c := range counts {
		if c > n || (c == n && msg < best) {
			best, n = msg, c
		}
	}
	return fmt.Sprintf("%q × %d", best, n)
}

// startBenchSim serves the default simulated engine on a free loopback
// port and returns its URL; stop shuts it down and waits for it.
func startBenchSim(ctx context.Context, slowdown float64, traffic *result.Traffic) (target string, stop func(), err error) {
	cfg := sim.DefaultConfig()
	cfg.Slowdown = slowdown
	cfg.LoRAModules = simAdapters(traffic, cfg.Model)
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- sim.Serve(sctx, cfg, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
	select {
	case addr := <-ready:
		return "http://" + addr, func() { cancel(); <-served }, nil //nolint:errcheck // waits for the sim to stop; a failure to serve showed in the run
	case err := <-served:
		cancel()
		return "", nil, err
	case <-time.After(10 * time.Second):
		cancel()
		return "", nil, errors.New("sim did not start listening within 10s")
	}
}

func parsePercentiles(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || !(p > 0 && p <= 100) {
			return nil, fmt.Errorf("%q: want numbers in (0, 100] such as 50,90,99", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no percentiles given")
	}
	return out, nil
}

// metadataFlag collects repeated --metadata KEY=VALUE pairs.
type metadataFlag map[string]string

func (m *metadataFlag) String() string {
	if m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*m))
	for k, v := range *m {
		pairs = append(pairs, k+"="+v)
	}
	return strings.Join(pairs, ",")
}

func (m *metadataFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	if *m == nil {
		*m = metadataFlag{}
	}
	(*m)[k] = strings.TrimSpace(v)
	return nil
}
