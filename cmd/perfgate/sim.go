package main

import (
	"context"
	"fmt"
	"os"

	"github.com/perfgate/perfgate/internal/sim"
)

func init() {
	register("sim", command{summary: "run a simulated OpenAI-compatible inference engine", run: runSim})
}

// runSim serves a simulated engine until the context (SIGINT/SIGTERM) ends.
// The first stdout line announces the bound address; tools that start the
// simulator parse it, so nothing may be printed before it.
func runSim(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("sim", "[--addr HOST:PORT] [flags]")
	cfg := sim.DefaultConfig()
	addr := fs.String("addr", sim.DefaultAddr, "listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "served model id")
	fs.DurationVar(&cfg.BaseTTFT, "base-ttft", cfg.BaseTTFT, "fixed prefill overhead per request")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", cfg.PrefillPerToken, "prefill time per prompt token")
	fs.DurationVar(&cfg.DecodeStep, "decode-step", cfg.DecodeStep, "base time of one decode step")
	fs.DurationVar(&cfg.PerSeqCost, "per-seq-cost", cfg.PerSeqCost, "extra step time per running sequence")
	fs.IntVar(&cfg.MaxNumSeqs, "max-num-seqs", cfg.MaxNumSeqs, "batch cap; further requests queue")
	fs.Float64Var(&cfg.Jitter, "jitter", cfg.Jitter, "relative std-dev of each step time")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed for jitter and error injection")
	fs.Float64Var(&cfg.Slowdown, "slowdown", cfg.Slowdown, "multiply every step time (1 = none; 1.2 = a 20% regression)")
	fs.Float64Var(&cfg.ErrorRate, "error-rate", cfg.ErrorRate, "fraction of requests answered HTTP 500")
	fs.IntVar(&cfg.StallMS, "stall-ms", cfg.StallMS, "stall each stream this many ms after half its tokens")
	fs.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", cfg.DefaultMaxTokens, "output length when a request sets no max_tokens")
	fs.DurationVar(&cfg.StartupDelay, "startup-delay", cfg.StartupDelay, "answer /health 503 for this long after start")
	tracePath := fs.String("trace", "", "write one JSON line per finished request to this file")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate sim: unexpected arguments %q\n", fs.Args())
		return 3
	}

	var trace *os.File
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate sim: create trace file: %v\n", err)
			return 1
		}
		trace = f
		cfg.Trace = f
	}
	err := sim.Serve(ctx, cfg, *addr, func(bound string) {
		fmt.Fprintf(env.stdout, "perfgate sim listening on http://%s\n", bound)
		env.log.Info().Str("addr", bound).Str("model", cfg.Model).
			Dur("decode_step", cfg.DecodeStep).Int("max_num_seqs", cfg.MaxNumSeqs).
			Float64("slowdown", cfg.Slowdown).Msg("sim engine ready")
	})
	if trace != nil {
		if cerr := trace.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close trace file: %w", cerr)
		}
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate sim: %v\n", err)
		return 1
	}
	env.log.Info().Msg("sim engine stopped")
	return 0
}
