package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

func init() {
	register("config", command{summary: "check a perfgate.yml (validate FILE) or which changed paths gate a PR (match FILE PATH...)", run: runConfigCmd})
}

func runConfigCmd(ctx context.Context, env *cliEnv, args []string) int {
	const usage = "usage: perfgate config validate [FILE]      (default " + config.DefaultPath + ")\n" +
		"       perfgate config match FILE PATH...   which changed paths would run the gate\nRun 'perfgate config validate -h' or 'perfgate config match -h' for their flags.\n"
	if len(args) == 0 {
		fmt.Fprint(env.stderr, usage)
		return 3
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(env.stdout, usage)
		return 0
	case "validate":
	case "match":
		return runConfigMatch(env, args[1:])
	default:
		fmt.Fprintf(env.stderr, "perfgate config: unknown subcommand %q", args[0])
		if s := suggest.Closest(args[0], []string{"validate", "match"}); s != "" {
			fmt.Fprintf(env.stderr, "; did you mean %q?", s)
		}
		fmt.Fprintf(env.stderr, "\n%s", usage)
		return 3
	}
	fs := env.flags("config validate", "[FILE]   (default "+config.DefaultPath+")")
	runMinutes := fs.Float64("run-minutes", 1, "what one measured run costs on your runner, its share of engine starts included (the check's settle note and `perfgate usage` show measured figures): prices each tier's settle budget")
	fs.epilog = "Exit status: 0 valid, 1 invalid (every error names file, line, field and a fix), 3 unreadable.\n"
	if code, ok := fs.parse(args[1:]); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) > 1 {
		fmt.Fprintf(env.stderr, "perfgate config validate: one file at a time, got %q\n", rest)
		return 3
	}
	path := config.DefaultPath
	if len(rest) == 1 {
		path = rest[0]
	}
	c, err := config.Load(path)
	if err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintln(env.stdout, ve.Error())
			fmt.Fprintf(env.stdout, "%s: %d error(s)\n", path, len(ve.Errors))
			return 1
		}
		fmt.Fprintf(env.stderr, "perfgate config: %v\n", err)
		return 3
	}
	fmt.Fprintf(env.stdout, "%s: ok\n", path)
	writeConfigSummary(env.stdout, c)
	writeSettleBudgets(env.stdout, c, *runMinutes)
	return 0
}

// writeSettleBudgets prices each tier's settle budget in the runner's own
// minutes: how many doublings of the first job it buys. A budget that
// cannot buy one is said now, not after the first inconclusive job: such
// a tier sends every inconclusive first job straight to a maintainer.
func writeSettleBudgets(w io.Writer, c *config.Config, runMinutes float64) {
	for _, name := range []string{"quick", "merge", "nightly"} {
		t, err := c.Tier(name)
		if err != nil || t.SettleGPUMinutes <= 0 {
			continue
		}
		runs, unit := t.Repeats, "runs"
		if t.Interleave {
			runs, unit = 2*t.Pairs, fmt.Sprintf("runs: %d base/head pairs", t.Pairs)
		}
		first := float64(runs) * runMinutes
		if first <= 0 {
			continue
		}
		// Doubling k adds as many runs as all before it: 1×, 2×, 4× the
		// first job.
		left, n, next := float64(t.SettleGPUMinutes), 0, first
		for left >= next {
			left -= next
			n++
			next *= 2
		}
		if n == 0 {
			fmt.Fprintf(w, "warning: tier %s: settle_gpu_minutes %d cannot buy one doubling of the first job (%d %s ≈ %.3g minutes at %.3g min/run): an inconclusive first job goes straight to a maintainer; raise it to at least %.0f, or set 0 to say that is meant\n",
				name, t.SettleGPUMinutes, runs, unit, first, runMinutes, math.Ceil(first))
			continue
		}
		fmt.Fprintf(w, "tier %s: settle_gpu_minutes %d buys %d doubling(s) of the first job (%d %s ≈ %.3g minutes at %.3g min/run)\n",
			name, t.SettleGPUMinutes, n, runs, unit, first, runMinutes)
	}
}

// writeConfigSummary prints the resolved config: what the defaults filled in.
func writeConfigSummary(w io.Writer, c *config.Config) {
	fmt.Fprintf(w, "paths: %s\n", strings.Join(c.Paths, ", "))
	if c.Server.Image != "" {
		fmt.Fprintf(w, "server: image %s, model %s\n", c.Server.Image, c.Server.Model)
	} else {
		fmt.Fprintf(w, "server: %s, model %s\n", strings.Join(append(append([]string{}, c.Server.Command...), c.Server.Args...), " "), c.Server.Model)
	}
	wl := c.Workload
	fmt.Fprintf(w, "workload: %s, input %d, output %d tokens, rate %s req/s, max concurrency %d\n", wl.Dataset, wl.InputLen, wl.OutputLen, wl.RequestRate, wl.MaxConcurrency)
	for _, name := range []string{"quick", "merge", "nightly"} {
		t, err := c.Tier(name)
		if err != nil {
			continue
		}
		var gated []string
		for _, m := range t.GatedMetrics() {
			th := t.Metrics[m]
			gated = append(gated, fmt.Sprintf("%s %+.3g%%", m, 100*th.Direction.Sign()*th.Limit))
		}
		fmt.Fprintf(w, "tier %s: %d prompts × %d runs, warmup %d, threshold %s, confidence %g; gated: %s\n",
			name, t.Prompts, t.Repeats, t.Warmup, t.Threshold, t.Confidence, strings.Join(gated, ", "))
	}
	fmt.Fprintf(w, "runner: labels %s", strings.Join(c.Runner.Labels, ", "))
	if c.Runner.GPUUUID != "" {
		fmt.Fprintf(w, ", gpu %s", c.Runner.GPUUUID)
	}
	fmt.Fprintf(w, "; escalate after %s\n", c.EscalateAfter)
}

// runConfigMatch prints, for each path, whether a PR changing it would run
// the gate and which pattern decided; as grep, it exits 0 when every path
// would run the gate, 1 when any would not, 2 on an error (an unreadable
// or invalid file, no paths).
func runConfigMatch(env *cliEnv, args []string) int {
	fs := env.flags("config match", "FILE PATH...")
	fs.epilog = "Prints, per path, whether a PR changing it would run the gate and which pattern decided.\n" +
		"Exit status (as grep): 0 every path would run the gate, 1 some would not, 2 an invalid or unreadable file.\n"
	if code, ok := fs.parse(args); !ok {
		if code != 0 {
			code = 2
		}
		return code
	}
	args = fs.Args()
	if len(args) < 2 {
		fmt.Fprintln(env.stderr, "usage: perfgate config match FILE PATH...")
		return 2
	}
	file, paths := args[0], args[1:]
	c, err := config.Load(file)
	if err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintln(env.stderr, ve.Error())
			fmt.Fprintf(env.stderr, "%s: %d error(s): fix them first (perfgate config validate %s)\n", file, len(ve.Errors), file)
			return 2
		}
		fmt.Fprintf(env.stderr, "perfgate config match: %v\n", err)
		return 2
	}
	f := c.Filter()
	code := 0
	for _, p := range paths {
		gated, pattern := f.Decide(p)
		switch {
		case gated:
			fmt.Fprintf(env.stdout, "%s: runs the gate (matches %q)\n", p, pattern)
		case pattern != "":
			fmt.Fprintf(env.stdout, "%s: does not run the gate (excluded by %q)\n", p, pattern)
			code = 1
		default:
			fmt.Fprintf(env.stdout, "%s: does not run the gate (no pattern matches; paths: %s)\n", p, strings.Join(c.Paths, ", "))
			code = 1
		}
	}
	return code
}
