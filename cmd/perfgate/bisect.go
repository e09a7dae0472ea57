package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
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
  git bisect run perfgate bisect run --good GOOD --metric tpot_p90

run measures the current checkout next to the good commit, in the same invocation and on the
same machine: the good commit is checked out in a temporary git worktree, and the two engines
(server.command of .github/perfgate.yml, or --command, started in each checkout) take turns
run by run in ABBA order, so a machine that drifts or takes a load burst meanwhile moves both
alike. It compares the pairs by the bisect's three-outcome rule and exits 0 (same as good),
1 (changed from good) or 125 (could not build, start or measure it, or still unknown at
--max-runs: git bisect skips it). A usage error, or a good commit that cannot be measured,
exits 128, which aborts the bisect.

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

// session is the engine of one checkout, started once per turn.
type session struct {
	env  *cliEnv
	plan agentapi.Plan
	srv  *engine.Server
	runs int // measured so far, for run ids
}

// checkout is a commit's tree on disk: where its engine starts and what
// {{.Workdir}} and {{.SHA}} name.
type checkout struct {
	dir, sha string
}

// currentCheckout is the working tree bisect runs in: git's top level and
// HEAD, or the working directory outside git.
func currentCheckout(ctx context.Context) (checkout, error) {
	dir, err := os.Getwd()
	if err != nil {
		return checkout{}, err
	}
	c := checkout{dir: dir}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output(); err == nil {
		c.dir = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output(); err == nil {
		c.sha = strings.TrimSpace(string(out))
	}
	return c, nil
}

// errSkip marks a commit that cannot be built, started or measured.
var errSkip = errors.New("cannot measure this commit")

// build runs --build in the checkout; failing makes it unmeasurable.
func build(ctx context.Context, env *cliEnv, f *engineFlags, co checkout) error {
	if f.build == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", f.build)
	cmd.Dir = co.dir
	cmd.Stdout, cmd.Stderr = env.stderr, env.stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: build %q in %s: %w", errSkip, f.build, co.dir, err)
	}
	return nil
}

// engineSpec is the engine of checkout co: started in it, with
// {{.Workdir}} and {{.SHA}} naming it.
func engineSpec(p agentapi.Plan, co checkout) engine.Spec {
	return engine.Spec{
		Command: p.Engine.Command, Args: p.Engine.Args, Model: p.Engine.Model,
		ReadinessPath: p.Engine.ReadinessPath, StartTimeout: p.Engine.StartTimeout.D(), Env: p.Engine.Env,
		GPUUUID: p.GPUUUID, JobID: "bisect", Workdir: co.dir, SHA: co.sha,
	}
}

// startSession starts the engine of checkout co (built already) and
// warms it up.
func startSession(ctx context.Context, env *cliEnv, p agentapi.Plan, co checkout) (*session, error) {
	srv, err := engine.Start(ctx, engineSpec(p, co), env.log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSkip, err)
	}
	s := &session{env: env, plan: p, srv: srv}
	if p.Warmup > 0 {
		o := s.options()
		o.NumPrompts, o.Seed = p.Warmup, o.Seed+1
		if _, err := bench.Run(ctx, o); err != nil {
			s.stop()
			return nil, fmt.Errorf("%w: warm-up: %w", errSkip, err)
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
			return nil, fmt.Errorf("%w: the engine crashed: %w", errSkip, s.srv.CrashError())
		default:
		}
		if err != nil {
			return nil, fmt.Errorf("%w: run %d: %w", errSkip, s.runs, err)
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
	co, err := currentCheckout(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 3
	}
	if err := build(ctx, env, &f, co); err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect measure: %v\n", err)
		return 1
	}
	s, err := startSession(ctx, env, p, co)
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
	fs := env.flags("bisect run", "--good COMMIT|GOOD.json [--metric M] [flags]")
	fs.epilog = "Exit status (git bisect run's): 0 good, 1 bad, 125 skip (cannot build, start or measure,\nor still unknown at --max-runs), 128 usage error or an unmeasurable good commit (aborts the bisect).\n"
	var f engineFlags
	f.register(fs)
	goodArg := fs.String("good", "", "the good commit (any git revision: measured next to this checkout, interleaved), or a file of its runs (perfgate bisect measure --output)")
	badPath := fs.String("bad", "", "with --good FILE only: runs of the bad commit (then 'same' means nearer good than bad)")
	metric := fs.String("metric", "tpot_p90", "the metric to bisect, e.g. tpot_p90, ttft_p90, output_throughput")
	maxRuns := fs.Int("max-runs", 0, "most runs (pairs, with --good COMMIT) of this commit while the comparison is unknown (default 3 rounds)")
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
	p, err := f.plan()
	if err != nil {
		return abort("%v", err)
	}
	limit := *maxRuns
	if limit <= 0 {
		limit = 3 * max(p.Repeats, minPairs)
	}
	if _, statErr := os.Stat(*goodArg); statErr == nil {
		return runBisectFile(ctx, env, &f, p, rule, *goodArg, *badPath, *metric, dir, limit)
	}
	if *badPath != "" {
		return abort("--bad goes with --good FILE: measured next to the good commit, a commit needs no bad reference")
	}
	goodSHA, err := revParse(ctx, *goodArg+"^{commit}")
	if err != nil {
		return abort("--good %q is neither a file nor a commit of this repository", *goodArg)
	}
	return runBisectPairs(ctx, env, &f, p, rule, goodSHA, *metric, dir, limit)
}

// minPairs is the fewest pairs of one round of bisect run.
const minPairs = 3

// runBisectPairs measures the checkout next to the good commit, checked
// out in a temporary worktree: rounds of ABBA pairs until the rule decides
// or limit pairs.
func runBisectPairs(ctx context.Context, env *cliEnv, f *engineFlags, p agentapi.Plan, rule bisect.Rule, goodSHA, metric string, dir float64, limit int) int {
	name := checkoutName(ctx)
	head, err := currentCheckout(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect run: %v (aborting the bisect)\n", err)
		return exitAbort
	}
	if head.sha == goodSHA {
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: the good commit itself → good\n", name)
		return exitGood
	}
	good, cleanup, err := addWorktree(ctx, head.dir, goodSHA)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect run: check out the good commit %.7s: %v (aborting the bisect)\n", goodSHA, err)
		return exitAbort
	}
	defer cleanup()
	if err := build(ctx, env, f, good); err != nil {
		fmt.Fprintf(env.stderr, "perfgate bisect run: the good commit %.7s: %v (aborting the bisect)\n", goodSHA, err)
		return exitAbort
	}
	if err := build(ctx, env, f, head); err != nil {
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
		return exitSkip
	}
	iv := &interleaved{env: env, plan: p, sides: [2]checkout{good, head}}
	defer iv.stop()
	var vals, refs []float64
	for round := 0; ; round++ {
		n := min(max(p.Repeats, minPairs), limit-len(vals))
		for k := range n {
			// ABBA over the whole invocation: good first in even pairs.
			order := []int{0, 1}
			if (len(vals)+k)%2 == 1 {
				order = []int{1, 0}
			}
			var got [2]float64
			for _, side := range order {
				v, err := iv.run(ctx, side, metric)
				if err != nil && side == 0 {
					fmt.Fprintf(env.stderr, "perfgate bisect run: the good commit %.7s: %v (aborting the bisect)\n", goodSHA, err)
					return exitAbort
				}
				if err != nil {
					fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
					return exitSkip
				}
				got[side] = v
			}
			refs, vals = append(refs, got[0]), append(vals, got[1])
		}
		c := rule.ComparePairs(vals, refs, dir)
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: %s %s next to good %.7s over %d interleaved pairs (significance ±%s): %s",
			name, metric, signedPercent(c.Change()), goodSHA, len(vals), unsignedPercent(c.HalfWidth), c.Outcome)
		switch {
		case c.Outcome == bisect.Same:
			fmt.Fprintln(env.stdout, " → good")
			return exitGood
		case c.Outcome == bisect.Different:
			fmt.Fprintln(env.stdout, " → bad")
			return exitBad
		case len(vals) >= limit:
			fmt.Fprintf(env.stdout, " → still unknown after %d pairs: skip\n", len(vals))
			return exitSkip
		}
		fmt.Fprintln(env.stdout, " → more pairs")
	}
}

// interleaved runs two checkouts' engines by turns on one machine: one
// engine at a time (as on one GPU), restarted and warmed up at each change
// of side, as the agent runs an interleaved job.
type interleaved struct {
	env   *cliEnv
	plan  agentapi.Plan
	sides [2]checkout
	cur   *session
	side  int
}

// run makes one run of side's engine and returns its value of metric.
func (iv *interleaved) run(ctx context.Context, side int, metric string) (float64, error) {
	if iv.cur == nil || iv.side != side {
		iv.stop()
		s, err := startSession(ctx, iv.env, iv.plan, iv.sides[side])
		if err != nil {
			return 0, err
		}
		iv.cur, iv.side = s, side
	}
	runs, err := iv.cur.measure(ctx, 1)
	if err != nil {
		return 0, err
	}
	vs, err := bisect.RunValues(runs, metric)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errSkip, err)
	}
	return vs[0], nil
}

func (iv *interleaved) stop() {
	if iv.cur != nil {
		iv.cur.stop()
		iv.cur = nil
	}
}

// addWorktree checks sha out in a temporary git worktree of the repository
// at dir; cleanup removes it.
func addWorktree(ctx context.Context, dir, sha string) (checkout, func(), error) {
	tmp, err := os.MkdirTemp("", "perfgate-bisect-good-")
	if err != nil {
		return checkout{}, nil, err
	}
	wt := filepath.Join(tmp, "tree")
	cmd := exec.CommandContext(ctx, "git", "worktree", "add", "--detach", "--quiet", wt, sha)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return checkout{}, nil, fmt.Errorf("git worktree add: %w: %s", err, strings.TrimSpace(string(out)))
	}
	cleanup := func() {
		rm := exec.Command("git", "worktree", "remove", "--force", wt)
		rm.Dir = dir
		_ = rm.Run()
		os.RemoveAll(tmp)
		prune := exec.Command("git", "worktree", "prune")
		prune.Dir = dir
		_ = prune.Run()
	}
	return checkout{dir: wt, sha: sha}, cleanup, nil
}

// revParse resolves a revision in the working directory's repository.
func revParse(ctx context.Context, rev string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", rev).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// runBisectFile judges the checkout against runs measured earlier (--good
// FILE): not drift-proof, and says so.
func runBisectFile(ctx context.Context, env *cliEnv, f *engineFlags, p agentapi.Plan, rule bisect.Rule, goodPath, badPath, metric string, dir float64, limit int) int {
	abort := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "perfgate bisect run: "+format+" (aborting the bisect)\n", a...)
		return exitAbort
	}
	good, err := referenceValues(goodPath, metric)
	if err != nil {
		return abort("--good: %v", err)
	}
	var bad []float64
	if badPath != "" {
		if bad, err = referenceValues(badPath, metric); err != nil {
			return abort("--bad: %v", err)
		}
	}
	name := checkoutName(ctx)
	fmt.Fprintf(env.stdout, "perfgate bisect run: %s: judged against runs measured earlier (%s): a machine that drifted since makes it look changed; --good COMMIT measures both now, interleaved\n", name, goodPath)
	co, err := currentCheckout(ctx)
	if err == nil {
		err = build(ctx, env, f, co)
	}
	var s *session
	if err == nil {
		s, err = startSession(ctx, env, p, co)
	}
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
		vs, err := bisect.RunValues(runs, metric)
		if err != nil {
			fmt.Fprintf(env.stdout, "perfgate bisect run: %s: skip: %v\n", name, err)
			return exitSkip
		}
		values = append(values, vs...)
		j := rule.JudgeToward(good, values, dir)
		if len(bad) > 0 {
			j = rule.Judge(good, values, bad)
		}
		fmt.Fprintf(env.stdout, "perfgate bisect run: %s: %s\n", name, describeJudgement(metric, good, values, bad, j))
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

func unsignedPercent(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*math.Expm1(r))
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
