package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/bench"
	"github.com/perfgate/perfgate/internal/bisect"
	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/engine"
	"github.com/perfgate/perfgate/internal/gate"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/stats"
	"github.com/perfgate/perfgate/internal/suggest"
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

const bisectUsage = `usage: perfgate bisect run --good GOOD.json [--bad BAD.json] [flags]   (under git bisect run)
       perfgate bisect measure --output FILE [flags]                      (make a reference)

  git checkout GOOD && perfgate bisect measure --output /tmp/good.json
  git bisect start BAD GOOD
  git bisect run perfgate bisect run --good /tmp/good.json --metric tpot_p90

run starts the engine of the current checkout (server.command of .github/perfgate.yml, or
--command), runs the tier's workload, compares the runs with the references by the bisect's
three-outcome rule and exits 0 (same as good), 1 (changed from good) or 125 (could not build,
start or measure it, or still unknown at --max-runs: git bisect skips it). A usage error
exits 128, which aborts the bisect.

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

// session is the engine of the current checkout, started once per commit.
type session struct {
	env  *cliEnv
	plan agentapi.Plan
	srv  *engine.Server
	runs int // measured so far, for run ids
}

// errSkip marks a commit that cannot be built, started or measured.
var errSkip = errors.New("cannot measure this commit")

// startSession builds the checkout, starts its engine and warms it up.
func startSession(ctx context.Context, env *cliEnv, f *engineFlags, p agentapi.Plan) (*session, error) {
	if f.build != "" {
		cmd := exec.CommandContext(ctx, "sh", "-c", f.build)
		cmd.Stdout, cmd.Stderr = env.stderr, env.stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%w: build %q: %v", errSkip, f.build, err)
		}
	}
	srv, err := engine.Start(ctx, engine.Spec{
		Command: p.Engine.Command, Args: p.Engine.Args, Model: p.Engine.Model,
		ReadinessPath: p.Engine.ReadinessPath, StartTimeout: p.Engine.StartTimeout.D(), Env: p.Engine.Env,
		GPUUUID: p.GPUUUID, JobID: "bisect",
	}, env.log)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSkip, err)
	}
	s := &session{env: env, plan: p, srv: srv}
	if p.Warmup > 0 {
		o := s.options()
		o.NumPrompts, o.Seed = p.Warmup, o.Seed+1
		if _, err := bench.Run(ctx, o); err != nil {
			s.stop()
			return nil, fmt.Errorf("%w: warm-up: %v", errSkip, err)
		}
	}
	return s, nil
}

func (s *session) options() bench.Options {
	w := s.plan.Workload
	return bench.Options{
		Target: s.srv.BaseURL(), Endpoint: w.Endpoint, Model: s.plan.Engine.Model,
		Dataset: w.Dataset, DatasetPath: w.DatasetPath, InputLen: w.InputLen, OutputLen: w.OutputLen,
		NumPrompts: w.NumPrompts, RequestRate: w.RequestRate, Burstiness: w.Burstiness,
		MaxConcurrency: w.MaxConcurrency, Seed: w.Seed, Temperature: w.Temperature, Timeout: w.Timeout.D(),
	}
}

// measure makes n runs. A run with more than the plan's share of failed
// requests, or an engine that died, makes the commit unmeasurable.
func (s *session) measure(ctx context.Context, n int) ([]*result.Result, error) {
	maxErr := s.plan.MaxErrorRate
	if maxErr == 0 {
		maxErr = agentapi.DefaultMaxErrorRate
	}
	var out []*result.Result
	for range n {
		o := s.options()
		o.RunID = fmt.Sprintf("bisect-r%d", s.runs)
		s.runs++
		res, err := bench.Run(ctx, o)
		select {
		case <-s.srv.Exited():
			return nil, fmt.Errorf("%w: the engine crashed: %v", errSkip, s.srv.CrashError())
		default:
		}
		if err != nil {
			return nil, fmt.Errorf("%w: run %d: %v", errSkip, s.runs, err)
		}
		if total := res.Completed + res.Failed; total == 0 || float64(res.Failed)/float64(total) > maxErr {
			return nil, fmt.Errorf("%w: run %d: %d of %d requests failed", errSkip, s.runs, res.Failed, total)
		}
		out = append(out, res)
	}
	return out, nil
}

func (s *session) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		s.env.log.Error().Err(err).Msg("stop engine")
	}
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
	s, err := startSession(ctx, env, &f, p)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	defer s.stop()
	runs, err := s.measure(ctx, p.Repeats)
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
	fmt.Fprintf(env.stdout, "perfgate bisect measure: %s: %d runs written to %s\n", checkoutName(ctx), len(runs), *output)
	return 0
}

func runBisectRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("bisect run", "--good GOOD.json [--bad BAD.json] [--metric M] [flags]")
	fs.epilog = "Exit status (git bisect run's): 0 good, 1 bad, 125 skip (cannot build, start or measure,\nor still unknown at --max-runs), 128 usage error (aborts the bisect).\n"
	var f engineFlags
	f.register(fs)
	goodPath := fs.String("good", "", "runs of the good commit (perfgate bisect measure --output, or bench result files as a JSON array)")
	badPath := fs.String("bad", "", "runs of the bad commit (optional: then 'same' means nearer good than bad)")
	metric := fs.String("metric", "tpot_p90", "the metric to bisect, e.g. tpot_p90, ttft_p90, output_throughput")
	maxRuns := fs.Int("max-runs", 0, "most runs of this commit while the comparison is unknown (default 3 rounds)")
	minChange := fs.String("min-change", "3%", "the smallest change worth finding")
	direction := fs.String("direction", "worse", "without --bad: which change makes a commit bad — worse (the metric's worse way), better, or either")
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
	if *goodPath == "" || fs.NArg() > 0 {
		return abort("need --good FILE and no other arguments")
	}
	m, ok := config.LookupMetric(*metric)
	if !ok {
		return abort("unknown metric %q", *metric)
	}
	var dir float64
	switch *direction {
	case "worse":
		dir = m.Natural.Sign()
	case "better":
		dir = -m.Natural.Sign()
	case "either":
	default:
		return abort("--direction %q: want worse, better or either", *direction)
	}
	rule := bisect.DefaultRule()
	mc, err := parsePercent(*minChange)
	if err != nil {
		return abort("--min-change: %v", err)
	}
	rule.MinChange = mc
	good, err := referenceValues(*goodPath, *metric)
	if err != nil {
		return abort("--good: %v", err)
	}
	var bad []float64
	if *badPath != "" {
		if bad, err = referenceValues(*badPath, *metric); err != nil {
			return abort("--bad: %v", err)
		}
	}
	p, err := f.plan()
	if err != nil {
		return abort("%v", err)
	}
	limit := *maxRuns
	if limit <= 0 {
		limit = 3 * p.Repeats
	}

	name := checkoutName(ctx)
	s, err := startSession(ctx, env, &f, p)
	if err != nil {
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
		return exitSkip
	}
	defer s.stop()
	var values []float64
	for {
		runs, err := s.measure(ctx, min(p.Repeats, limit-len(values)))
		if err != nil {
			fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
			return exitSkip
		}
		vs, err := bisect.RunValues(runs, *metric)
		if err != nil {
			fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
			return exitSkip
		}
		values = append(values, vs...)
		j := rule.JudgeToward(good, values, dir)
		if len(bad) > 0 {
			j = rule.Judge(good, values, bad)
		}
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: %s\n", name, describeJudgement(*metric, good, values, bad, j))
		switch {
		case j.Verdict == bisect.Good:
			return exitGood
		case j.Verdict == bisect.Bad:
			return exitBad
		case len(values) >= limit:
			fmt.Fprintf(env.stdout, "perfgate bisect run: %s: still unknown after %d runs: skip\n", name, len(values))
			return exitSkip
		}
	}
}

// referenceValues reads a reference file's runs and returns each run's
// value of metric.
func referenceValues(path, metric string) ([]float64, error) {
	runs, err := gate.LoadRuns(path)
	if err != nil {
		return nil, err
	}
	out, err := bisect.RunValues(runs, metric)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: %d run(s); measure at least 2 (perfgate bisect measure makes the tier's repeats)", path, len(out))
	}
	return out, nil
}

func describeJudgement(metric string, good, values, bad []float64, j bisect.Judgement) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s median %.4g over %d runs; good %.4g: %s %s", metric, stats.Median(values), len(values),
		stats.Median(good), signedPercent(j.VsGood.Change()), j.VsGood.Outcome)
	if len(bad) > 0 {
		fmt.Fprintf(&b, "; bad %.4g: %s %s", stats.Median(bad), signedPercent(math.Expm1(-j.VsBad.D)), j.VsBad.Outcome)
	}
	fmt.Fprintf(&b, " → %s", j.Verdict)
	if j.Between {
		b.WriteString(" (between the good and bad levels: more than one change)")
	}
	return b.String()
}

func signedPercent(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*r)
}

// checkoutName is the current commit's short SHA, or "HEAD".
func checkoutName(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "HEAD"
	}
	return strings.TrimSpace(string(out))
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
