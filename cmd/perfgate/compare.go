package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

func init() {
	register("compare", command{summary: "judge candidate runs against a baseline (exit 0 pass, 1 regression, 2 inconclusive)", run: runCompare})
}

func runCompare(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("compare", "--candidate R1.json [R2.json …] --baseline B.json [B2.json …] [--tier merge] [--config FILE] [--paired] [--history H.json|DIR …] [--looks L.json] [--json]")
	tierName := fs.String("tier", "merge", "tier whose thresholds apply")
	cfgPath := fs.String("config", "", "perfgate config (default "+config.DefaultPath+" when it exists, else the defaults)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	paired := fs.Bool("paired", false, "the runs are an interleaved job's base (--baseline) and head (--candidate) runs: paired and grouped into engine starts by the places the agent wrote into the files, as the server does (files without places: the i-th with the i-th), and judged by their per-pair ratios")
	looksPath := fs.String("looks", "", "the commit's look budget so far (the \"looks\" of the previous look's --json report): this look spends the next share of α")
	var cands, bases, hist []string
	fs.Func("candidate", "candidate result file(s); several may follow one flag", func(s string) error { cands = append(cands, s); return nil })
	fs.Func("baseline", "baseline file(s): results, a JSON array of results, or a baseline export", func(s string) error { bases = append(bases, s); return nil })
	fs.Func("history", "earlier A/A run set of the baseline, or a directory of them (repeatable): the noise prior; an interleaved job's files (with places) are the paired prior", func(s string) error {
		files, err := historyFiles(s)
		hist = append(hist, files...)
		return err
	})
	if code, ok := fs.parse(expandMultiValueFlags(args, "candidate", "baseline")); !ok {
		return code
	}
	if fs.NArg() > 0 || len(cands) == 0 || len(bases) == 0 {
		fmt.Fprintf(env.stderr, "perfgate compare: need --candidate and --baseline files\n")
		fs.Usage()
		return 3
	}
	cfg, err := loadConfigOrDefault(*cfgPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
		return 3
	}
	tier, err := cfg.Tier(*tierName)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
		return 3
	}
	candidate, err := loadAllRuns(cands)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: candidate: %v\n", err)
		return 3
	}
	baseline, err := loadAllRuns(bases)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: baseline: %v\n", err)
		return 3
	}
	in := judge.Input{Tier: tier, Key: tier.Name, Job: judge.Ended{FailureReason: "the candidate files hold no runs"}}
	var histRuns []*result.Result
	for _, h := range hist {
		set, err := gate.LoadRuns(h)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: history: %v\n", err)
			return 3
		}
		in.History.Sessions = append(in.History.Sessions, gate.Session{Label: h, Runs: set})
		histRuns = append(histRuns, set...)
	}
	if *looksPath != "" {
		data, err := os.ReadFile(*looksPath)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --looks: %v\n", err)
			return 3
		}
		if err := json.Unmarshal(data, &in.Looks); err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --looks %s: %v (want the \"looks\" object of a --json report)\n", *looksPath, err)
			return 3
		}
	}
	if *paired {
		il, err := judge.PairFiles(baseline, candidate)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --paired: %v\n", err)
			return 3
		}
		il.History = judge.HistoryFiles(histRuns)
		in.Interleaved = il
	} else {
		in.Runs, in.Base = judge.Evidence{Runs: candidate}, &judge.Base{Runs: baseline}
	}
	// The server's decision function, on the same inputs: the document
	// is the server's byte for byte; its notes go beside it.
	d := judge.Judge(in)
	switch d.Outcome {
	case judge.Publish:
	case judge.Extend:
		// The server would add runs on the same card; here the look's
		// inconclusive document is the answer, and the next look is a
		// compare with those runs added (and this look's --looks).
		d.Notes = append(d.Notes, fmt.Sprintf("the server would add %d more runs (pairs when interleaved) within the tier's settle_gpu_minutes and judge all of them at the next look", d.More))
	case judge.Broken:
		fmt.Fprintf(env.stderr, "perfgate compare: %s\n", strings.Join(d.Reasons, "; "))
		return 3
	default: // the files give no settle budget and no stored verdict
		fmt.Fprintf(env.stderr, "perfgate compare: the judgement asked to %s, which a comparison of files cannot do\n", d.Outcome)
		return 3
	}
	for _, n := range d.Notes {
		fmt.Fprintf(env.stderr, "perfgate compare: note: %s\n", n)
	}
	rep := d.Report
	env.log.Info().Str("tier", tier.Name).Str("verdict", string(rep.Verdict)).
		Int("baseline_runs", rep.BaselineRuns).Int("candidate_runs", rep.CandidateRuns).Msg("compared")
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
			return 3
		}
	} else if err := rep.WriteText(env.stdout); err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
		return 3
	} else if err := writeCost(env.stdout, cfg, rep); err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
		return 3
	}
	return rep.Verdict.ExitCode()
}

// historyFiles is what one --history names: a file, or each .json file
// of a directory in name order (one session a file, as the server keeps
// one session a stored baseline; an interleaved job's files group by the
// job their places name).
func historyFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return []string{path}, nil // a file; LoadRuns says what is wrong with it
	}
	files, err := filepath.Glob(filepath.Join(path, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("--history %s: %w", path, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("--history %s: no .json files in the directory", path)
	}
	sort.Strings(files)
	return files, nil
}

// expandMultiValueFlags rewrites "--candidate a b --baseline c" into
// "--candidate a --candidate b --baseline c" so the flag package can read
// several files after one flag.
func expandMultiValueFlags(args []string, names ...string) []string {
	multi := map[string]bool{}
	for _, n := range names {
		multi["-"+n], multi["--"+n] = true, true
	}
	var out []string
	current := ""
	for _, a := range args {
		switch {
		case a == "--":
			current = ""
			out = append(out, a)
		case multi[a]:
			current = a
		case strings.HasPrefix(a, "-") && a != "-":
			current = ""
			out = append(out, a)
		case current != "":
			out = append(out, current, a)
		default:
			out = append(out, a)
		}
	}
	return out
}

func loadAllRuns(paths []string) ([]*result.Result, error) {
	var out []*result.Result
	for _, p := range paths {
		rs, err := gate.LoadRuns(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// loadConfigOrDefault reads the named config, or the repository's when it
// exists, or returns the defaults.
func loadConfigOrDefault(path string) (*config.Config, error) {
	if path == "" {
		if _, err := os.Stat(config.DefaultPath); err != nil {
			return config.Default(), nil
		}
		path = config.DefaultPath
	}
	return config.Load(path)
}
