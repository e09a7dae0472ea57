package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

func init() {
	register("baseline", command{summary: "promote, show, list, export and import verified baselines", run: runBaseline})
}

const baselineUsage = `usage: perfgate baseline SUBCOMMAND [flags]

  promote --repo R --key K --version V --by LOGIN [--commit SHA] [--allow-lower --reason "…"]
          [--tier merge] [--config FILE] RESULT.json…
      store runs (perfgate bench --output files, or an export file) as the next baseline
  import  --by LOGIN [--allow-lower --reason "…"] EXPORT.json
      promote an export file under its own repo, key, version and commit
  show    --repo R --key K [--version N|V] [--tier merge]
      metadata, medians of the gated metrics and the re-run recipe
  list    --repo R
      the latest baseline of every key
  export  --repo R --key K [--version N|V] [-o FILE]
      write a baseline in the export layout (default: stdout)

Every subcommand works on the server's database, found as perfgate serve finds
it (PERFGATE_DATABASE_URL, PERFGATE_DATA_DIR, --server-config; --db DSN
overrides), and never creates one.
--by defaults to $PERFGATE_USER, else $USER; with neither set it must be given.
'perfgate baseline SUBCOMMAND -h' lists a subcommand's flags.
Exit status: 0 ok, 1 refused by a baseline rule (the message says which and how to
override), 3 usage or any other error.
`

func runBaseline(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, baselineUsage)
		return 3
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "promote":
		return runBaselinePromote(ctx, env, rest, false)
	case "import":
		return runBaselinePromote(ctx, env, rest, true)
	case "show":
		return runBaselineShow(ctx, env, rest)
	case "list":
		return runBaselineList(ctx, env, rest)
	case "export":
		return runBaselineExport(ctx, env, rest)
	case "help", "-h", "--help":
		fmt.Fprint(env.stdout, baselineUsage)
		return 0
	}
	fmt.Fprintf(env.stderr, "perfgate baseline: unknown subcommand %q", sub)
	if s := suggest.Closest(sub, []string{"promote", "import", "show", "list", "export"}); s != "" {
		fmt.Fprintf(env.stderr, "; did you mean %q?", s)
	}
	fmt.Fprintf(env.stderr, "\nRun 'perfgate baseline -h' for the subcommands.\n")
	return 3
}

// baselineSynopsis is each subcommand's usage line.
var baselineSynopsis = map[string]string{
	"promote": `--repo R --key K --version V --by LOGIN [--commit SHA] [--allow-lower --reason "…"] [--tier merge] [--config FILE] RESULT.json…`,
	"import":  `--by LOGIN [--allow-lower --reason "…"] EXPORT.json`,
	"show":    "--repo R --key K [--version N|V] [--tier merge]",
	"list":    "--repo R",
	"export":  "--repo R --key K [--version N|V] [-o FILE]",
}

// baselineFlags are the flags every subcommand shares.
type baselineFlags struct {
	fs        *flagSet
	db        *storeFlags
	repo, key *string
}

func newBaselineFlags(env *cliEnv, name string, withKey bool) *baselineFlags {
	fs := env.flags("baseline "+name, baselineSynopsis[name])
	fs.epilog = "Exit status: 0 ok, 1 refused by a baseline rule, 3 usage or any other error.\n"
	f := &baselineFlags{fs: fs,
		db:   addStoreFlags(fs),
		repo: fs.String("repo", "", "repository, owner/name"),
	}
	if withKey {
		f.key = fs.String("key", "", "matrix entry, e.g. llama-8b-tp8")
	}
	return f
}

// parse returns -1 to go on, or the exit code.
func (f *baselineFlags) parse(env *cliEnv, args []string) int {
	if code, ok := f.fs.parse(args); !ok {
		return code
	}
	return -1
}

func (f *baselineFlags) open(ctx context.Context, env *cliEnv) (store.Store, bool) {
	st, err := f.db.open(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate %s: %v\n", f.fs.Name(), err)
		return nil, false
	}
	return st, true
}

func (f *baselineFlags) require(env *cliEnv, names ...string) bool {
	for _, n := range names {
		if f.fs.Lookup(n).Value.String() == "" {
			fmt.Fprintf(env.stderr, "perfgate %s: --%s is required\n", f.fs.Name(), n)
			return false
		}
	}
	return true
}

func runBaselinePromote(ctx context.Context, env *cliEnv, args []string, importing bool) int {
	name := "promote"
	if importing {
		name = "import"
	}
	f := newBaselineFlags(env, name, true)
	version := f.fs.String("version", "", "release version the baseline is bound to, e.g. v0.26.0")
	commit := f.fs.String("commit", "", "commit the runs measured (default: the one the runs record)")
	by := f.fs.String("by", envOr("PERFGATE_USER", os.Getenv("USER")), "who promotes (GitHub login), for the audit log; required (default $PERFGATE_USER, else $USER)")
	allowLower := f.fs.Bool("allow-lower", false, "promote even if worse than the current baseline (needs --reason)")
	reason := f.fs.String("reason", "", "why: required with --allow-lower, recorded in the audit log")
	tierName := f.fs.String("tier", "merge", "tier whose gated metrics decide \"worse\"")
	cfgPath := f.fs.String("config", "", "perfgate config (default .github/perfgate.yml when it exists, else the defaults)")
	if code := f.parse(env, args); code >= 0 {
		return code
	}
	files := f.fs.Args()
	switch {
	case len(files) == 0:
		fmt.Fprintf(env.stderr, "perfgate baseline %s: give the result files to promote\n", name)
		return 3
	case importing && len(files) != 1:
		fmt.Fprintf(env.stderr, "perfgate baseline import: give one export file\n")
		return 3
	case *allowLower && strings.TrimSpace(*reason) == "":
		fmt.Fprintf(env.stderr, "perfgate baseline %s: --allow-lower needs --reason \"…\" saying why (it is recorded)\n", name)
		return 3
	}

	var runs []*result.Result
	var exported *baseline.Snapshot
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, err)
			return 3
		}
		rs, err := gate.ParseRuns(data)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate baseline %s: %s: %v\n", name, path, err)
			return 3
		}
		runs = append(runs, rs...)
		if s, err := baseline.Import(bytes.NewReader(data)); err == nil && len(files) == 1 {
			exported = &s
		}
	}
	if importing && exported == nil {
		fmt.Fprintf(env.stderr, "perfgate baseline import: %s is not an export file (perfgate baseline export writes one)\n", files[0])
		return 3
	}
	if exported != nil {
		// An export file names its own repo, key, version and commit;
		// flags given explicitly win.
		setDefault(f.repo, exported.Repo)
		setDefault(f.key, exported.Key)
		setDefault(version, exported.Label)
		setDefault(commit, exported.Commit)
	}
	if !f.require(env, "repo", "key", "version", "by") {
		return 3
	}
	cfg, err := loadConfigOrDefault(*cfgPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, err)
		return 3
	}
	tier, err := cfg.Tier(*tierName)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, err)
		return 3
	}
	st, ok := f.open(ctx, env)
	if !ok {
		return 3
	}
	defer st.Close()

	meta := baseline.Meta{Repo: *f.repo, Key: *f.key, Version: *version, Commit: *commit, By: *by,
		Reason: *reason, AllowLower: *allowLower}
	b, rep, err := baseline.Promote(ctx, st, runs, meta, tier)
	if rep != nil {
		fmt.Fprintf(env.stdout, "compared with the current baseline:\n")
		if werr := rep.WriteText(env.stdout); werr != nil {
			fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, werr)
		}
		fmt.Fprintln(env.stdout)
	}
	var refused *baseline.RefusedError
	switch {
	case errors.As(err, &refused):
		env.log.Warn().Str("repo", meta.Repo).Str("key", meta.Key).Str("version", meta.Version).Str("rule", refused.Rule).Msg("promotion refused")
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, err)
		return 1
	case err != nil:
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", name, err)
		return 3
	}
	env.log.Info().Str("repo", b.Repo).Str("key", b.Key).Int("number", b.Version).Str("version", meta.Version).
		Str("commit", b.Commit).Str("by", b.PromotedBy).Bool("lowered", b.AllowLower).Msg("baseline promoted")
	fmt.Fprintf(env.stdout, "promoted %s %s as baseline #%d (%s) at commit %s by %s, %d runs\n",
		b.Repo, b.Key, b.Version, meta.Version, b.Commit, b.PromotedBy, len(runs))
	if b.AllowLower {
		fmt.Fprintf(env.stdout, "lowered with --allow-lower: %s (recorded in the audit log)\n", b.Reason)
	}
	return 0
}

func setDefault(flagValue *string, v string) {
	if *flagValue == "" {
		*flagValue = v
	}
}

func runBaselineShow(ctx context.Context, env *cliEnv, args []string) int {
	f := newBaselineFlags(env, "show", true)
	ref := f.fs.String("version", "", "baseline number (#N) or release version (default: the latest)")
	tierName := f.fs.String("tier", "merge", "tier whose metrics to show")
	cfgPath := f.fs.String("config", "", "perfgate config (default .github/perfgate.yml when it exists, else the defaults)")
	if code := f.parse(env, args); code >= 0 {
		return code
	}
	if f.fs.NArg() > 0 || !f.require(env, "repo", "key") {
		return 3
	}
	cfg, err := loadConfigOrDefault(*cfgPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline show: %v\n", err)
		return 3
	}
	tier, err := cfg.Tier(*tierName)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline show: %v\n", err)
		return 3
	}
	st, ok := f.open(ctx, env)
	if !ok {
		return 3
	}
	defer st.Close()
	s, ok := findBaseline(ctx, env, st, "show", *f.repo, *f.key, *ref)
	if !ok {
		return 3
	}
	// The medians exactly as the gate reads them, and the spread it sees.
	rep, err := gate.Compare(s.Runs, s.Runs, tier, gate.Options{Looks: gate.SingleLook()})
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline show: %v\n", err)
		return 3
	}
	writeShow(env.stdout, s, rep)
	return 0
}

func writeShow(w io.Writer, s baseline.Snapshot, rep *gate.Report) {
	fmt.Fprintf(w, "%s %s baseline #%d (%s)\n\n", s.Repo, s.Key, s.Version, s.Label)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var first result.Environment
	if len(s.Runs) > 0 && s.Runs[0].Perfgate != nil {
		first = s.Runs[0].Perfgate.Environment
	}
	l := s.Load
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("commit", s.Commit)
	row("engine", s.ImageDigest)
	gpu := fmt.Sprintf("%s (%s)", s.GPU, s.GPUUUID)
	if first.GPUCount > 1 {
		gpu += fmt.Sprintf(" ×%d", first.GPUCount)
	}
	row("gpu", gpu)
	driver := s.Driver
	if first.CUDA != "" {
		driver += ", CUDA " + first.CUDA
	}
	row("driver", driver)
	conc := "none"
	if l.MaxConcurrency > 0 {
		conc = fmt.Sprint(l.MaxConcurrency)
	}
	row("load", fmt.Sprintf("%s %s, %s dataset, %d prompts (in %d / out %d tokens), rate %s req/s, burstiness %g, concurrency %s, seed %d, temperature %g, warm-up %d",
		l.Endpoint, l.Model, l.Dataset, l.NumPrompts, l.InputLen, l.OutputLen, l.RequestRate, l.Burstiness, conc, l.Seed, l.Temperature, s.Warmup))
	row("dataset", s.DatasetHash)
	row("promoted", fmt.Sprintf("%s by %s", s.CreatedAt.UTC().Format(time.RFC3339), s.PromotedBy))
	if s.Reason != "" {
		row("reason", s.Reason)
	}
	if s.AllowLower {
		row("lowered", "yes: worse than the baseline before it, allowed with --allow-lower (see the audit log)")
	}
	row("runs", fmt.Sprint(len(s.Runs)))
	tw.Flush()

	fmt.Fprintf(w, "\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  metric\tmedian\tnoise band\n")
	for _, m := range rep.Metrics {
		if m.Note != "" {
			fmt.Fprintf(tw, "  %s\t-\t%s\n", m.Metric, m.Note)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Metric, showValue(m), showBand(m))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nre-run:\n")
	for _, line := range s.Recipe() {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

func showValue(m gate.MetricResult) string {
	switch m.Unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", m.Baseline)
	case "":
		return fmt.Sprintf("%.2f%%", 100*m.Baseline) // error_rate
	case "MiB", "W":
		return fmt.Sprintf("%.0f %s", m.Baseline, m.Unit)
	}
	return fmt.Sprintf("%.4g %s", m.Baseline, m.Unit)
}

func showBand(m gate.MetricResult) string {
	if m.Unit == "" {
		return fmt.Sprintf("±%.2gpp", 100*m.NoiseBand)
	}
	return fmt.Sprintf("±%.2g%%", 100*m.NoiseBand)
}

func runBaselineList(ctx context.Context, env *cliEnv, args []string) int {
	f := newBaselineFlags(env, "list", false)
	if code := f.parse(env, args); code >= 0 {
		return code
	}
	if f.fs.NArg() > 0 || !f.require(env, "repo") {
		return 3
	}
	st, ok := f.open(ctx, env)
	if !ok {
		return 3
	}
	defer st.Close()
	list, err := st.ListBaselines(ctx, *f.repo)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline list: %v\n", err)
		return 3
	}
	if len(list) == 0 {
		fmt.Fprintf(env.stdout, "no baselines for %s: promote one with perfgate baseline promote\n", *f.repo)
		return 0
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key\t#\tversion\tcommit\tgpu\tpromoted\tby\tlowered\n")
	for _, b := range list {
		lowered := ""
		if b.AllowLower {
			lowered = "yes"
		}
		commit := rev.Log(b.Commit)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Key, b.Version, baseline.Label(b), commit, b.GPU,
			b.CreatedAt.UTC().Format("2006-01-02 15:04"), b.PromotedBy, lowered)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline list: %v\n", err)
		return 3
	}
	return 0
}

func runBaselineExport(ctx context.Context, env *cliEnv, args []string) int {
	f := newBaselineFlags(env, "export", true)
	ref := f.fs.String("version", "", "baseline number (#N) or release version (default: the latest)")
	out := f.fs.String("o", "", "write to FILE instead of stdout")
	if code := f.parse(env, args); code >= 0 {
		return code
	}
	if f.fs.NArg() > 0 || !f.require(env, "repo", "key") {
		return 3
	}
	st, ok := f.open(ctx, env)
	if !ok {
		return 3
	}
	defer st.Close()
	s, ok := findBaseline(ctx, env, st, "export", *f.repo, *f.key, *ref)
	if !ok {
		return 3
	}
	var buf bytes.Buffer
	if err := baseline.Export(s.Baseline, &buf); err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline export: %v\n", err)
		return 3
	}
	if *out == "" {
		if _, err := env.stdout.Write(buf.Bytes()); err != nil {
			fmt.Fprintf(env.stderr, "perfgate baseline export: %v\n", err)
			return 3
		}
		return 0
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline export: %v\n", err)
		return 3
	}
	env.log.Info().Str("repo", s.Repo).Str("key", s.Key).Int("number", s.Version).Str("file", *out).Msg("baseline exported")
	return 0
}

func findBaseline(ctx context.Context, env *cliEnv, st store.Store, sub, repo, key, ref string) (baseline.Snapshot, bool) {
	s, err := baseline.Find(ctx, st, repo, key, ref)
	if errors.Is(err, store.ErrNotFound) {
		what := "no baseline"
		if ref != "" {
			what = "no baseline " + ref
		}
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %s for %s %s (perfgate baseline list --repo %s shows what there is)\n", sub, what, repo, key, repo)
		return baseline.Snapshot{}, false
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate baseline %s: %v\n", sub, err)
		return baseline.Snapshot{}, false
	}
	return s, true
}
