package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

func init() {
	register("simulate-gate", command{summary: "measure the gate's false-alarm and detection rates on synthetic runs", run: runSimulateGate})
}

// noiseModels names the simulation's noise models on the command line.
var noiseModels = map[string]gate.NoiseModel{
	"n2": gate.DefaultNoiseModels[0], "n5": gate.DefaultNoiseModels[1],
	"t2": gate.DefaultNoiseModels[2], "t5": gate.DefaultNoiseModels[3],
}

func runSimulateGate(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("simulate-gate", "[--gates 20000] [--tier merge] [--design stored|interleaved] [flags]")
	gates := fs.Int("gates", 20000, "gates per noise model, for each rate")
	tierName := fs.String("tier", "merge", "tier simulated")
	cfgPath := fs.String("config", "", "perfgate config whose tier is simulated (default: the built-in defaults)")
	design := fs.String("design", "", "stored (candidate runs vs a stored baseline) or interleaved (base/head pairs); default: the tier's")
	runs := fs.Int("runs", 0, "candidate runs per session (stored) or pairs per job (interleaved); default: the tier's repeats or pairs")
	baseRuns := fs.Int("baseline-runs", 5, "runs in the stored baseline and in each history session")
	history := fs.Int("history", 4, "earlier sessions of unchanged code the gate gets as noise history (0: none, a new repository)")
	sessionCV := fs.Float64("session-cv", 0.02, "session-to-session shift (coefficient of variation; each job is a session)")
	drift := fs.Float64("drift", 0.002, "random-walk drift per run within a session")
	metric := fs.String("metric", gate.DefaultSimMetric, "gated latency metric the true regressions are injected into")
	deltas := fs.String("delta", "0.05,0.08", "comma-separated true regressions whose detection rate is reported")
	retests := fs.Int("retests", 5, "retests in the A/A retest sequence (false alarms after 1…N retests)")
	seed := fs.Uint64("seed", 1, "random seed")
	noise := fs.String("noise", "n2,n5,t2,t5", "noise models: n2/n5 normal CV 2%/5%, t2/t5 t(5) with 3% outlier runs")
	sweep := fs.String("sweep", "", "comma-separated deltas for the smallest-detectable search, e.g. 0.02,0.04,0.06,0.08,0.10,0.15,0.20")
	sweepGates := fs.Int("sweep-gates", 2000, "gates per swept delta")
	stress := fs.String("stress", "", "run the stresses of a real runner instead: all, or comma-separated names' prefixes (see docs/gate.md)")
	profile := fs.String("profile", "", "noise profile JSON (per-metric CVs, start_cv, session_cv) added as a stress, e.g. measured on a real engine")
	aa := fs.Int("aa", 10000, "with --stress: A/A gates per stress")
	runMin := fs.Float64("run-minutes", 1.0, "with --stress: GPU-minutes of one measured run")
	startMin := fs.Float64("start-minutes", 0.5, "with --stress: GPU-minutes of one engine start and its warm-up")
	plan := fs.String("plan", "", "with --stress: the looks' spending plan, pocock (default) or obrien-fleming")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: "+format+"\n", a...)
		return 3
	}
	cfg0 := config.Default()
	if *cfgPath != "" {
		c, err := config.Load(*cfgPath)
		if err != nil {
			return bad("%v", err)
		}
		cfg0 = c
	}
	tier, err := cfg0.Tier(*tierName)
	if err != nil {
		return bad("%v", err)
	}
	if *stress != "" || *profile != "" {
		return runStress(env, tier, *stress, *profile, *plan, *aa, *gates, *deltas, *history, *sessionCV, *drift, *runMin, *startMin, *seed, flagGiven(fs.FlagSet, "delta"), flagGiven(fs.FlagSet, "gates"))
	}
	if *gates < 1 || *baseRuns < 3 || *history < 0 || *retests < 0 || *sessionCV < 0 || *drift < 0 || fs.NArg() > 0 {
		return bad("bad arguments: need --gates ≥ 1, --baseline-runs ≥ 3, non-negative --history, --retests, --session-cv, --drift")
	}
	cfg := gate.SimConfig{Tier: tier, Design: *design, Gates: *gates, Runs: *runs, BaselineRuns: *baseRuns, HistorySets: *history,
		SessionCV: *sessionCV, Drift: *drift, Metric: *metric, Retests: *retests, Seed: *seed, SweepGates: *sweepGates}
	if cfg.Design == "" {
		cfg.Design = gate.DesignStored
		if tier.Interleave {
			cfg.Design = gate.DesignInterleaved
		}
	}
	if cfg.Runs == 0 {
		cfg.Runs = tier.Repeats
		if cfg.Design == gate.DesignInterleaved {
			cfg.Runs = tier.Pairs
		}
	}
	if cfg.Deltas, err = parseDeltas(*deltas); err != nil {
		return bad("--delta: %v", err)
	}
	if *sweep != "" {
		if cfg.Sweep, err = parseDeltas(*sweep); err != nil {
			return bad("--sweep: %v", err)
		}
	}
	for _, n := range strings.Split(*noise, ",") {
		m, ok := noiseModels[strings.TrimSpace(n)]
		if !ok {
			return bad("--noise: unknown model %q (n2, n5, t2, t5)", n)
		}
		cfg.Models = append(cfg.Models, m)
	}
	rows, err := gate.Simulate(cfg)
	if err != nil {
		return bad("%v", err)
	}
	if err := gate.WriteSimTable(env.stdout, cfg, rows); err != nil {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: %v\n", err)
		return 1
	}
	return 0
}

func parseDeltas(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(d > 0) {
			return nil, fmt.Errorf("bad delta %q: want a fraction such as 0.05", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// flagGiven reports whether the command line set the flag.
func flagGiven(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runStress prints the per-stress table: the merge tier's procedure (first
// job, pairs added within the settle budget) under each hard world.
func runStress(env *cliEnv, tier config.Tier, names, profile, plan string, aa, gates int, deltas string, history int, sessionCV, drift, runMin, startMin float64, seed uint64, deltaSet, gatesSet bool) int {
	bad := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: "+format+"\n", a...)
		return 3
	}
	cfg := gate.StressConfig{Tier: tier, Gates: aa, DeltaGates: 4000, Deltas: []float64{0.03, 0.05, 0.08}, HistorySets: history,
		SessionCV: sessionCV, Drift: drift, RunMinutes: runMin, StartMinutes: startMin, Seed: seed, Plan: plan}
	if plan != "" && plan != gate.PlanPocock && plan != gate.PlanOBrienFleming {
		return bad("--plan %q: want %s or %s", plan, gate.PlanPocock, gate.PlanOBrienFleming)
	}
	if history == 4 {
		cfg.HistorySets = 8 // the dispatcher's pair history
	}
	if gatesSet {
		cfg.DeltaGates = gates
	}
	if deltaSet {
		d, err := parseDeltas(deltas)
		if err != nil {
			return bad("--delta: %v", err)
		}
		cfg.Deltas = d
	}
	if aa < 1 || cfg.DeltaGates < 1 || !(runMin >= 0) || !(startMin >= 0) {
		return bad("bad arguments: need --aa ≥ 1, --gates ≥ 1, non-negative --run-minutes and --start-minutes")
	}
	all := gate.Stresses()
	switch {
	case names == "all" || (names == "" && profile != ""):
		if names == "" {
			all = nil
		}
		cfg.Stresses = all
	default:
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			found := false
			for _, st := range all {
				if strings.HasPrefix(st.Name, n) {
					cfg.Stresses, found = append(cfg.Stresses, st), true
				}
			}
			if !found {
				var known []string
				for _, st := range all {
					known = append(known, st.Name)
				}
				return bad("--stress: no stress named %q; known: all, %s", n, strings.Join(known, "; "))
			}
		}
	}
	if profile != "" {
		p, err := gate.LoadNoiseProfile(profile)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Profile = &p
	}
	rows, err := gate.SimulateStress(cfg)
	if err != nil {
		return bad("%v", err)
	}
	if err := gate.WriteStressTable(env.stdout, cfg, rows); err != nil {
		fmt.Fprintf(env.stderr, "perfgate simulate-gate: %v\n", err)
		return 1
	}
	return 0
}
