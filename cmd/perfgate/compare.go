package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

func init() {
	register("compare", command{summary: "judge candidate runs against a baseline (exit 0 pass, 1 regression, 2 inconclusive)", run: runCompare})
}

func runCompare(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("compare", "--candidate R1.json [R2.json …] --baseline B.json [B2.json …] [--tier merge] [--config FILE] [--paired] [--history H.json …] [--looks L.json] [--json]")
	tierName := fs.String("tier", "merge", "tier whose thresholds apply")
	cfgPath := fs.String("config", "", "perfgate config (default "+config.DefaultPath+" when it exists, else the defaults)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	paired := fs.Bool("paired", false, "the runs are an interleaved job's: pair the i-th baseline run with the i-th candidate run (base and head, in run order) and judge the per-pair ratios")
	looksPath := fs.String("looks", "", "the commit's look budget so far (the \"looks\" of the previous look's --json report): this look spends the next share of α")
	var cands, bases, hist []string
	fs.Func("candidate", "candidate result file(s); several may follow one flag", func(s string) error { cands = append(cands, s); return nil })
	fs.Func("baseline", "baseline file(s): results, a JSON array of results, or a baseline export", func(s string) error { bases = append(bases, s); return nil })
	fs.Func("history", "earlier A/A run set of the baseline (repeatable): the noise prior", func(s string) error { hist = append(hist, s); return nil })
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
	var opt gate.Options
	var histRuns []*result.Result
	for _, h := range hist {
		set, err := gate.LoadRuns(h)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: history: %v\n", err)
			return 3
		}
		opt.History.Sessions = append(opt.History.Sessions, gate.Session{Label: h, Runs: set})
		histRuns = append(histRuns, set...)
	}
	if *looksPath != "" {
		data, err := os.ReadFile(*looksPath)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --looks: %v\n", err)
			return 3
		}
		if err := json.Unmarshal(data, &opt.Looks); err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --looks %s: %v (want the \"looks\" object of a --json report)\n", *looksPath, err)
			return 3
		}
	}
	var rep *gate.Report
	if *paired {
		var pairs []gate.Pair
		var notes []string
		pairs, notes, err = pairsOf(baseline, candidate)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --paired: %v\n", err)
			return 3
		}
		if opt.History.Paired, err = pairHistoryOf(histRuns); err != nil {
			fmt.Fprintf(env.stderr, "perfgate compare: --history: %v\n", err)
			return 3
		}
		// The pairing's notes go beside the verdict, as on the server's
		// check, so the document stays the server's byte for byte.
		for _, n := range notes {
			fmt.Fprintf(env.stderr, "perfgate compare: note: %s\n", n)
		}
		rep, err = gate.ComparePaired(pairs, tier, opt)
	} else {
		rep, err = gate.Compare(baseline, candidate, tier, opt)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate compare: %v\n", err)
		return 3
	}
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

// pairsOf pairs an interleaved job's runs the way the server does: from
// the places the agent wrote into each result (job, side, pair, position),
// through the same gate.MakePairs, so engine starts shared by neighbouring
// runs are known and the verdict is the server's. Files without places
// (plain `perfgate bench` output) are paired in file order, each run its
// own start, and a note says the server may decide otherwise.
func pairsOf(baseline, candidate []*result.Result) ([]gate.Pair, []string, error) {
	all := append(append([]*result.Result(nil), baseline...), candidate...)
	placed := 0
	for _, r := range all {
		if r.Perfgate != nil && r.Perfgate.Place != nil && r.Perfgate.Place.Side != "" {
			placed++
		}
	}
	switch placed {
	case len(all):
		for i, r := range baseline {
			if r.Perfgate.Place.Side != gate.SideBase {
				return nil, nil, fmt.Errorf("baseline run %d is a %s run of job %d", i+1, r.Perfgate.Place.Side, r.Perfgate.Place.Job)
			}
		}
		for i, r := range candidate {
			if r.Perfgate.Place.Side != gate.SideHead {
				return nil, nil, fmt.Errorf("candidate run %d is a %s run of job %d", i+1, r.Perfgate.Place.Side, r.Perfgate.Place.Job)
			}
		}
		sided, err := gate.SidedRunsOf(all)
		if err != nil {
			return nil, nil, err
		}
		return gate.MakePairs(sided)
	case 0:
		if len(baseline) != len(candidate) {
			return nil, nil, fmt.Errorf("needs as many baseline runs as candidate runs, got %d and %d", len(baseline), len(candidate))
		}
		pairs := make([]gate.Pair, len(baseline))
		for i := range pairs {
			pairs[i] = gate.Pair{Session: "1", Index: i, Base: baseline[i], Head: candidate[i]}
		}
		return pairs, []string{"the result files carry no place in a job (perfgate.place): pairs were taken in file order and each run counted as its own engine start; the server, which knows the order, may decide otherwise"}, nil
	}
	return nil, nil, fmt.Errorf("%d of %d runs carry their place in a job: give all of one job's files, or none", placed, len(all))
}

// pairHistoryOf groups placed history runs into their jobs' pairs, the
// noise prior the server gives a paired comparison; none without places.
func pairHistoryOf(runs []*result.Result) ([][]gate.Pair, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	sided, err := gate.SidedRunsOf(runs)
	if err != nil {
		// History without places is the stored kind: History.Sessions
		// already carries it.
		return nil, nil
	}
	pairs, _, err := gate.MakePairs(sided)
	if err != nil {
		return nil, err
	}
	var out [][]gate.Pair
	for _, p := range pairs {
		if n := len(out); n == 0 || out[n-1][0].Session != p.Session {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], p)
	}
	return out, nil
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
