package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/bench"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/sim"
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

func runBench(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("bench", "(--target URL | --sim) [flags]")
	var o bench.Options
	fs.StringVar(&o.Target, "target", "", "engine base URL, e.g. http://127.0.0.1:8000")
	fs.StringVar(&o.Endpoint, "endpoint", bench.EndpointCompletions, "API endpoint: "+bench.EndpointCompletions+" (the default, as in .github/perfgate.yml) or "+bench.EndpointChat)
	fs.StringVar(&o.Model, "model", "", "model name to request (default: the first of GET /v1/models)")
	fs.StringVar(&o.Dataset, "dataset", "random", "dataset: random, sharegpt or jsonl")
	fs.StringVar(&o.DatasetPath, "dataset-path", "", "dataset file for sharegpt (ShareGPT JSON) or jsonl ({\"prompt\":…,\"output_len\":N} per line)")
	fs.IntVar(&o.InputLen, "input-len", 0, fmt.Sprintf("prompt tokens per request for the random dataset (default %d; %d with --sim)", bench.DefaultInputLen, simInputLen))
	fs.IntVar(&o.OutputLen, "output-len", 0, fmt.Sprintf("max_tokens per request; for sharegpt/jsonl it overrides the dataset's (random default %d; %d with --sim)", bench.DefaultOutputLen, simOutputLen))
	fs.IntVar(&o.NumPrompts, "num-prompts", bench.DefaultNumPrompts, fmt.Sprintf("measured requests (%d with --sim)", simNumPrompts))
	rate := fs.String("request-rate", "inf", "mean requests/s, or inf to send all at once")
	fs.Float64Var(&o.Burstiness, "burstiness", 1, "gamma shape of inter-arrival times: 1 is Poisson, <1 burstier, >1 more even")
	fs.IntVar(&o.MaxConcurrency, "max-concurrency", 0, fmt.Sprintf("cap on requests in flight, 0 for none (%d with --sim)", simMaxConcurrency))
	fs.IntVar(&o.Warmup, "warmup", 0, "warm-up requests sent first and discarded")
	fs.Int64Var(&o.Seed, "seed", 0, "seed for the dataset sample and the arrival times")
	fs.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature sent with each request")
	fs.DurationVar(&o.Timeout, "timeout", bench.DefaultTimeout, "per request: the longest wait for the response or its next stream line")
	goodput := fs.String("goodput", "", `SLOs for goodput in ms, space-separated, e.g. "ttft:500 tpot:50 e2el:10000"`)
	var metadata metadataFlag
	fs.Var(&metadata, "metadata", "KEY=VALUE recorded with the result (repeatable)")
	output := fs.String("output", "", "write the result JSON (vLLM's keys plus a perfgate section) to this file")
	percentiles := fs.String("percentiles", "50,90,95,99", "comma-separated percentiles to report")
	useSim := fs.Bool("sim", false, "start the built-in simulated engine on 127.0.0.1 and benchmark it")
	simSlowdown := fs.Float64("sim-slowdown", 1, "with --sim: multiply the engine's step times (1.2 = a 20% regression)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate bench: "+format+"\n", a...)
		return 3
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	if o.RequestRate, err = result.ParseRate(*rate); err != nil {
		return usage("--request-rate: %v", err)
	}
	if o.Goodput, err = bench.ParseGoodput(*goodput); err != nil {
		return usage("--goodput: %v", err)
	}
	if len(o.Goodput) == 0 {
		o.Goodput = nil
	}
	if o.Percentiles, err = parsePercentiles(*percentiles); err != nil {
		return usage("--percentiles: %v", err)
	}
	if len(metadata) > 0 {
		o.Metadata = metadata
	}
	if set["sim-slowdown"] && !*useSim {
		return usage("--sim-slowdown needs --sim")
	}
	if *useSim {
		if o.Target != "" {
			return usage("--target and --sim are exclusive: --sim benchmarks the built-in engine")
		}
		if !(*simSlowdown > 0) {
			return usage("--sim-slowdown: must be > 0 (1 = none)")
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
			if !set[d.flag] {
				*d.v = d.def
			}
		}
		target, stop, err := startBenchSim(ctx, *simSlowdown)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate bench: start sim: %v\n", err)
			return 1
		}
		defer stop()
		o.Target = target
	} else if o.Target == "" {
		return usage("--target: required (the engine's base URL, e.g. http://127.0.0.1:8000), or pass --sim")
	}
	o.Progress = env.stderr

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
	if *useSim {
		res.Perfgate.Environment.Sim = true
		res.Perfgate.Environment.EngineImage = "perfgate sim" // the slowdown is what a comparison measures, not the engine's identity
	}
	bench.WriteSummary(env.stdout, res)
	if *output != "" {
		if err := res.WriteFile(*output); err != nil {
			fmt.Fprintf(env.stderr, "perfgate bench: %v\n", err)
			return 1
		}
		env.log.Info().Str("file", *output).Msg("result written")
	}
	return 0
}

// startBenchSim serves the default simulated engine on a free loopback
// port and returns its URL; stop shuts it down and waits for it.
func startBenchSim(ctx context.Context, slowdown float64) (target string, stop func(), err error) {
	cfg := sim.DefaultConfig()
	cfg.Slowdown = slowdown
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- sim.Serve(sctx, cfg, "127.0.0.1:0", func(addr string) { ready <- addr }) }()
	select {
	case addr := <-ready:
		return "http://" + addr, func() { cancel(); <-served }, nil
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
