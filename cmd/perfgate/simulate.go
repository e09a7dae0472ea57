package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/gate"
)

func init() {
	register("simulate-gate", command{summary: "measure the gate's false-alarm and detection rates on synthetic runs", run: runSimulateGate})
}

func runSimulateGate(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("simulate-gate", "[--gates 10000] [--tier merge] [flags]")
	gates := fs.Int("gates", 10000, "gates per noise model, for each of the two rates")
	runs := fs.Int("runs", 0, "candidate runs (default: the tier's repeats)")
	baseRuns := fs.Int("baseline-runs", 5, "runs in the baseline")
	history := fs.Int("history", 4, "earlier A/A run sets feeding the noise prior (0: none)")
	delta := fs.Float64("delta", 0.08, "true tpot_p99 regression to detect")
	seed := fs.Uint64("seed", 1, "random seed")
	tierName := fs.String("tier", "merge", "tier")
	sweep := fs.String("sweep", "", "comma-separated deltas for the smallest-detectable search, e.g. 0.02,0.04,0.06,0.08,0.10,0.15,0.20")
	sweepGates := fs.Int("sweep-gates", 2000, "gates per swept delta")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	tier, err := config.Default().Tier(*tierName)
	if err != nil || *gates < 1 || *baseRuns < 3 || fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: bad arguments (%v)\n", err)
		return 3
	}
	cfg := gate.SimConfig{Tier: tier, Gates: *gates, Runs: *runs, BaselineRuns: *baseRuns, HistorySets: *history,
		Delta: *delta, Seed: *seed, Models: gate.DefaultNoiseModels, SweepGates: *sweepGates}
	if cfg.Runs == 0 {
		cfg.Runs = tier.Repeats
	}
	if *sweep != "" {
		for _, s := range strings.Split(*sweep, ",") {
			d, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || d <= 0 {
				fmt.Fprintf(env.stderr, "perfgate simulate-gate: bad sweep delta %q\n", s)
				return 3
			}
			cfg.Sweep = append(cfg.Sweep, d)
		}
	}
	rows, err := gate.Simulate(cfg)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: %v\n", err)
		return 1
	}
	if err := gate.WriteSimTable(env.stdout, cfg, rows); err != nil {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: %v\n", err)
		return 1
	}
	return 0
}
