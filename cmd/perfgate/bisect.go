package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/runner/gitbisect"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

func init() {
	register("bisect", command{summary: "measure the checkout for git bisect run (exit 0 good, 1 bad, 125 skip)", run: runBisect})
}

// git bisect run's exit codes. Anything above 127 aborts the bisect, which
// is what a usage error must do: 3, perfgate's usual, would mark the
// commit bad.
const (
	exitGood  = 0
	exitBad   = 1
	exitSkip  = 125
	exitAbort = 128
)

func runBisect(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, bisectUsage)
		return 3
	}
	switch args[0] {
	case "run":
		return runBisectRun(ctx, env, args[1:])
	case "measure":
		return runBisectMeasure(ctx, env, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, bisectUsage)
		return 0
	}
	fmt.Fprintf(env.stderr, "perfgate bisect: unknown subcommand %q", args[0])
	if s := suggest.Closest(args[0], []string{"run", "measure"}); s != "" {
		fmt.Fprintf(env.stderr, "; did you mean %q?", s)
	}
	fmt.Fprintf(env.stderr, "\nRun 'perfgate bisect -h' for the subcommands.\n")
	return 3
}

const bisectUsage = `usage: perfgate bisect run --good COMMIT [flags]                    (under git bisect run)
       perfgate bisect run --good GOOD.json [--bad BAD.json] [flags]   (runs measured earlier)
       perfgate bisect measure --output FILE [flags]                      (make a reference file)

  git bisect start BAD GOOD
  git bisect run perfgate bisect run --good GOOD --metric tpot_median

run measures the current checkout next to the good commit, in the same invocation and on the
same machine: the good commit is checked out in a temporary git worktree, and the two engines
(server.command of .github/perfgate.yml, or --command, started in each checkout) take turns
run by run in ABBA order, so a machine that drifts or takes a load burst meanwhile moves both
alike. The first step of a bisect also measures the bad end (the first commit git bisect marked
bad, or --bad) next to the good one and keeps its pairs in the git directory: half its change
is the margin of "same". Pairs are added, sized to the noise, until the bisect's rule decides:
exit 0 (same as good), 1 (changed from good), or 125 (could not build, start or measure it, or
still unknown at --max-pairs: git bisect skips it). A usage error, a good or bad end that cannot
be measured, or ends that do not differ exit 128, which aborts the bisect. Every answer prints
its reason.

With --good FILE (runs that bisect measure wrote earlier) nothing is interleaved: a machine
that drifted since makes every commit look changed. Prefer a commit.

'perfgate bisect run -h' and 'perfgate bisect measure -h' list the flags.
`

// engineFlags are what run and measure share: how to start the engine and
// what load to offer.
type engineFlags struct {
	configPath   string
	command      string
	model        string
	build        string
	tier         string
	runs         int
	prompts      int
	warmup       int
	startTimeout time.Duration
}

func (f *engineFlags) register(fs *flagSet) {
	fs.StringVar(&f.configPath, "config", "", "perfgate config (default "+config.DefaultPath+" of the checkout when it exists, else the defaults)")
	fs.StringVar(&f.command, "command", "", `engine command template, instead of the config's server.command, e.g. "perfgate sim --config inference_engine/sim.yaml --port {{.Port}}" (quotes group words; no shell)`)
	fs.StringVar(&f.model, "model", "", "served model (default: the config's server.model)")
	fs.StringVar(&f.build, "build", "", "shell command that builds the checkout first; failing skips the commit (exit 125)")
	fs.StringVar(&f.tier, "tier", "quick", "tier whose workload, warm-up and repeats to use")
	fs.IntVar(&f.runs, "runs", 0, "measured runs per round (default: the tier's repeats)")
	fs.IntVar(&f.prompts, "prompts", 0, "requests per run (default: the tier's prompts)")
	fs.IntVar(&f.warmup, "warmup", -1, "warm-up requests (default: the tier's)")
	fs.DurationVar(&f.startTimeout, "start-timeout", 0, "how long the engine may take to serve (default: the config's start_timeout)")
}

// plan resolves the flags against the config into an engine and a workload.
func (f *engineFlags) plan() (agentapi.Plan, error) {
	cfg, err := loadConfigOrDefault(f.configPath)
	if err != nil {
		return agentapi.Plan{}, err
	}
	if f.command != "" {
		argv, err := splitCommand(f.command)
		if err != nil {
			return agentapi.Plan{}, fmt.Errorf("--command: %w", err)
		}
		cfg.Server.Command, cfg.Server.Image = argv, ""
	}
	if f.model != "" {
		cfg.Server.Model = f.model
	}
	p, err := agentapi.PlanFromConfig(cfg, f.tier)
	if err != nil {
		return agentapi.Plan{}, err
	}
	if p.Engine.Image != "" {
		return agentapi.Plan{}, errors.New("the config runs an image: bisect measures the checkout, so give the command that starts its engine with --command")
	}
	if f.runs > 0 {
		p.Repeats = f.runs
	}
	if f.prompts > 0 {
		p.Workload.NumPrompts = f.prompts
	}
	if f.warmup >= 0 {
		p.Warmup = f.warmup
	}
	if f.startTimeout > 0 {
		p.Engine.StartTimeout = agentapi.Duration(f.startTimeout)
	}
	return p, nil
}

func runBisectMeasure(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("bisect measure", "--output FILE [flags]")
	fs.epilog = "Exit status: 0 written, 1 the commit could not be built, started or measured, 3 usage.\n"
	var f engineFlags
	f.register(fs)
	output := fs.String("output", "", "write the runs here (a JSON array of results): the --good or --bad of bisect run")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *output == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "perfgate bisect measure: need --output FILE and no other arguments")
		return 3
	}
	p, err := f.plan()
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 3
	}
	co, err := gitbisect.CurrentCheckout(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 3
	}
	if err := gitbisect.Build(ctx, f.build, co, env.stderr); err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	s, err := gitbisect.Start(ctx, p, co, env.log)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	defer s.Stop()
	runs, err := s.Measure(ctx, p.Repeats)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	data, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: encode runs: %v\n", err)
		return 1
	}
	if err := os.WriteFile(*output, append(data, '\n'), 0o644); err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.stdout, "perfgate bisect measure: %s: %d runs written to %s\n", gitbisect.ShortName(ctx), len(runs), *output)
	return 0
}

func runBisectRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("bisect run", "--good COMMIT|GOOD.json [--metric M] [flags]")
	fs.epilog = "Exit status (git bisect run's): 0 good, 1 bad, 125 skip (cannot build, start or measure,\nor still unknown at --max-pairs), 128 usage error, an unmeasurable good or bad end, or ends\nthat do not differ (aborts the bisect).\n"
	var f engineFlags
	f.register(fs)
	goodArg := fs.String("good", "", "the good commit (any git revision: measured next to this checkout, interleaved), or a file of its runs (perfgate bisect measure --output)")
	badArg := fs.String("bad", "", "the bad commit, measured once next to the good one to size the rule (default: the first commit git bisect marked bad); with --good FILE, a file of its runs")
	metric := fs.String("metric", "tpot_p90", "the metric to bisect, e.g. tpot_p90, tpot_median, ttft_p90, output_throughput")
	maxPairs := fs.Int("max-pairs", 0, fmt.Sprintf("the budget: most interleaved pairs of this commit with the good one (and of the ends) before it is skipped undecided (default %d)", bisect.DefaultMaxPairs))
	fs.IntVar(maxPairs, "max-runs", 0, "old name of --max-pairs")
	minChange := fs.String("min-change", "3%", "the smallest change worth finding")
	direction := fs.String("direction", "worse", "which change makes a commit bad — worse (the metric's worse way), better, or either")
	if code, ok := fs.parse(args); !ok {
		if code == 0 {
			return 0
		}
		return exitAbort // a bad flag must stop git bisect, not mark the commit
	}
	abort := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate bisect run: "+format+" (aborting the bisect)\n", a...)
		return exitAbort
	}
	if *goodArg == "" || fs.NArg() > 0 {
		return abort("need --good COMMIT (or a file of its runs) and no other arguments")
	}
	m, ok := config.LookupMetric(*metric)
	if !ok {
		return abort("unknown metric %q", *metric)
	}
	o := gitbisect.Options{Build: f.build, Metric: *metric, Out: env.stdout, BuildOut: env.stderr, Log: env.log}
	switch *direction {
	case "worse":
		o.Direction = m.Natural.Sign()
	case "better":
		o.Direction = -m.Natural.Sign()
	case "either":
	default:
		return abort("--direction %q: want worse, better or either", *direction)
	}
	mc, err := parsePercent(*minChange)
	if err != nil {
		return abort("--min-change: %v", err)
	}
	o.Config.Rule = bisect.DefaultRule()
	o.Config.Rule.MinChange = mc
	o.Config.MaxPairs = *maxPairs
	if o.Plan, err = f.plan(); err != nil {
		return abort("%v", err)
	}
	if _, statErr := os.Stat(*goodArg); statErr == nil {
		return exitCode(gitbisect.RunAgainstFiles(ctx, o, *goodArg, *badArg))
	}
	goodSHA, err := gitbisect.RevParse(ctx, *goodArg+"^{commit}")
	if err != nil {
		return abort("--good %q is neither a file nor a commit of this repository", *goodArg)
	}
	if *badArg != "" {
		if o.Bad, err = gitbisect.RevParse(ctx, *badArg+"^{commit}"); err != nil {
			return abort("--bad %q is not a commit of this repository (a file of runs goes with --good FILE)", *badArg)
		}
	}
	return exitCode(gitbisect.Run(ctx, o, goodSHA))
}

// exitCode is git bisect run's exit code for an answer.
func exitCode(a gitbisect.Answer) int {
	switch a {
	case gitbisect.Good:
		return exitGood
	case gitbisect.Bad:
		return exitBad
	case gitbisect.Skip:
		return exitSkip
	}
	return exitAbort
}

func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v <= 0 || v >= 100 {
		return 0, fmt.Errorf("%q is not a percentage between 0 and 100, e.g. 3%%", s)
	}
	return v / 100, nil
}

// splitCommand splits a command line into words as a shell would for
// quoting only: '…' keeps everything, "…" keeps spaces and honours \" and
// \\, a backslash outside quotes escapes the next character. Nothing is
// expanded.
func splitCommand(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   rune
		escaped bool
	)
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\':
			escaped, inWord = true, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("unterminated quote or escape in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}
