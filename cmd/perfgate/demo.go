package main

import (
	"context"
	"fmt"

	"github.com/perfgate/perfgate/internal/demo"
)

func init() {
	register("demo", command{summary: "run the whole loop locally: SQLite, a real git repository, an agent starting the simulated engine from each commit, a PR that regresses", run: runDemo})
}

func runDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("demo", "[--scenario scheduler] [--slowdown 1.2] [--dir DIR|postgres://…]")
	scenario := fs.String("scenario", "", `"scheduler": a PR turns up the engine's prefill eagerness; the profile diff names it and, after /perf rootcause, a second PR with the same change is recognised (default: the slowdown scenario)`)
	slowdown := fs.Float64("slowdown", 1.2, "the engine slowdown the PR's commit writes into inference_engine/sim.yaml (1.2 = 20% slower)")
	dir := fs.String("dir", "", "directory for the demo's SQLite store (default: a new temporary directory), or a postgres:// DSN")
	serve := fs.String("serve", "", "after the demo, keep the server up on this address (e.g. 127.0.0.1:8080) with a month of nightly history, and print the dashboard's URL")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate demo: unexpected arguments %q\n", fs.Args())
		return 3
	}
	if *slowdown <= 0 {
		fmt.Fprintln(env.stderr, "perfgate demo: --slowdown must be positive")
		return 3
	}
	switch *scenario {
	case "":
	case "scheduler":
		if _, err := demo.RunScheduler(ctx, demo.Options{Dir: *dir, Out: env.stdout, Log: env.log}); err != nil {
			fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(env.stderr, "perfgate demo: --scenario %q: want scheduler (or none)\n", *scenario)
		return 3
	}
	if _, err := demo.Run(ctx, demo.Options{Dir: *dir, Slowdown: *slowdown, Out: env.stdout, Log: env.log, Serve: *serve}); err != nil {
		fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
		return 1
	}
	return 0
}
