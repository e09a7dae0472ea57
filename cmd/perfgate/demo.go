package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/demo"
)

func init() {
	register("demo", command{summary: "run the whole loop locally: SQLite, a real git repository, an agent starting the simulated engine from each commit, a PR that regresses (--scenario scheduler: the profile diff and the knowledge base; --scenario bisect: find the commit on main that slowed the engine; --scenario capacity: a PR that moves the knee; --scenario soak: a planted leak)", run: runDemo})
}

func runDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("demo", "[--engine sim|ollama] [--scenario scheduler|bisect|capacity|soak] [--slowdown 1.2] [--dir DIR|postgres://…] [--commits N --planted K]")
	scenario := fs.String("scenario", "", `"scheduler": a PR turns up the engine's prefill eagerness; the profile diff names it and, after /perf rootcause, a second PR with the same change is recognised; "bisect": a maintainer's /perf bisect finds which commit on main slowed the engine; "capacity": a PR shrinks the KV cache, light-load latency unchanged, and the capacity tier's sweep finds the knee moved; "soak": a PR that leaks memory per request fails the soak tier, a clean one passes (default: the slowdown scenario)`)
	slowdown := fs.Float64("slowdown", 1.2, "the engine slowdown the regressing commit writes into inference_engine/sim.yaml (1.2 = 20% slower)")
	dir := fs.String("dir", "", "directory for the demo's SQLite store (default: a new temporary directory), or a postgres:// DSN")
	serve := fs.String("serve", "", "after the demo, keep the server up on this address (e.g. 127.0.0.1:8080) with a month of nightly history, and print the dashboard's URL")
	commits := fs.Int("commits", 8, "--scenario bisect: the commits that land on main after the good one")
	planted := fs.Int("planted", 0, "--scenario bisect: which of them (1…commits) slows the engine; 0 picks one at random")
	engine := fs.String("engine", demo.EngineSim, "the engine the repository serves: sim (perfgate's simulator) or ollama (a real engine: Ollama built from the Go module proxy, on the CPU; install: "+demo.OllamaInstall+")")
	sweeps := fs.Int("sweeps", 1, "--scenario capacity: sweeps of base and head each (ABBA)")
	soakFor := fs.Duration("soak-duration", 2*time.Minute, "--scenario soak: how long each pull request's engine is soaked")
	ollama := fs.String("ollama", "", "--engine ollama: the ollama binary (default: $OLLAMA_BIN, PATH, then the Go bin directory)")
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
	if *engine != demo.EngineSim && *engine != demo.EngineOllama {
		fmt.Fprintf(env.stderr, "perfgate demo: --engine %q: want sim or ollama\n", *engine)
		return 3
	}
	if *engine == demo.EngineOllama && *scenario != "" && *scenario != "default" && *scenario != "bisect" {
		fmt.Fprintf(env.stderr, "perfgate demo: --engine ollama runs the default scenario (a slower model, a docs-only PR) and the bisect; --scenario %s is on the sim\n", *scenario)
		return 3
	}
	if log, quieter := demoLog(env.log, env.logLevelChosen, isTerminal(env.stderr)); quieter {
		fmt.Fprintln(env.stderr, "perfgate demo: the story is on stdout; the server's and agent's logs show at warn here (--log-level info for all of them)")
		env = &cliEnv{stdout: env.stdout, stderr: env.stderr, log: log, logLevelChosen: true}
	}
	switch *scenario {
	case "", "default":
		_, err := demo.Run(ctx, demo.Options{Dir: *dir, Slowdown: *slowdown, Out: env.stdout, Log: env.log, Serve: *serve, Engine: *engine, Ollama: *ollama})
		return demoExit(env.stderr, err)
	case "scheduler":
		if _, err := demo.RunScheduler(ctx, demo.Options{Dir: *dir, Out: env.stdout, Log: env.log}); err != nil {
			fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
			return 1
		}
	case "bisect":
		if *serve != "" {
			fmt.Fprintln(env.stderr, "perfgate demo: --serve goes with the default scenario")
			return 3
		}
		if *commits < 1 || *planted < 0 || *planted > *commits {
			fmt.Fprintf(env.stderr, "perfgate demo: --commits must be at least 1 and --planted one of 1…%d (0: at random)\n", *commits)
			return 3
		}
		out, err := demo.RunBisect(ctx, demo.BisectOptions{Dir: *dir, Commits: *commits, Planted: *planted, Slowdown: *slowdown,
			Engine: *engine, Ollama: *ollama, Out: env.stdout, Log: env.log})
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
			return 1
		}
		if out.Found != out.Planted {
			return 1
		}
	case "capacity":
		out, err := demo.RunCapacity(ctx, demo.Options{Dir: *dir, Out: env.stdout, Log: env.log, Sweeps: *sweeps})
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
			return 1
		}
		// The last line says what happened, in the verdict document's own
		// headline (the check's): the planted KV-cache cut found, or why
		// not — a distorted sweep is "cannot tell", never a verdict.
		rep := out.Verdict.Report
		switch rep.Verdict {
		case gate.Regression:
			fmt.Fprintf(env.stdout, "capacity: the planted KV-cache cut was found: %s\n", rep.Headline)
		case gate.Inconclusive:
			fmt.Fprintf(env.stdout, "capacity: could not decide (exit 2): %s\n", rep.Headline)
			return 2
		default:
			fmt.Fprintf(env.stdout, "capacity: the planted KV-cache cut was NOT found (exit 4): %s\n", rep.Headline)
			return 4
		}
	case "soak":
		out, err := demo.RunSoak(ctx, demo.Options{Dir: *dir, Out: env.stdout, Log: env.log, SoakDuration: *soakFor})
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate demo: %v\n", err)
			return 1
		}
		if out.Leak.Report.Pass || !out.Clean.Report.Pass {
			return 1
		}
	default:
		fmt.Fprintf(env.stderr, "perfgate demo: --scenario %q: want scheduler, bisect, capacity or soak (or none)\n", *scenario)
		return 3
	}
	return 0
}

// demoExit is the default demo's exit status: 0 when the story ran to its
// end, demo.ExitUndecided or demo.ExitOtherVerdict (with the explanation)
// when the gate's verdicts cut it short, 1 for any other error.
func demoExit(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var u *demo.VerdictError
	if errors.As(err, &u) {
		fmt.Fprintf(stderr, "perfgate demo: stopped short of the story (exit %d):\n%s", u.ExitCode(), u.Explanation)
		return u.ExitCode()
	}
	fmt.Fprintf(stderr, "perfgate demo: %v\n", err)
	return 1
}

// demoLog is the demo's logger: on a terminal, where the log lines would
// interleave with the story on stdout, the server's and agent's info lines
// are left out unless a level was chosen.
func demoLog(log zerolog.Logger, chosen, terminal bool) (zerolog.Logger, bool) {
	if chosen || !terminal || log.GetLevel() >= zerolog.WarnLevel {
		return log, false
	}
	return log.Level(zerolog.WarnLevel), true
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
