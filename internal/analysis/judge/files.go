package judge

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Sided is the Interleaved evidence of sided runs, in the order given
// (job by job, each job's runs in the order they ran): the order each job
// ran its sides in and the commit each side measured.
func Sided(runs []gate.SidedRun) Interleaved {
	il := Interleaved{Runs: runs, Commits: map[string]string{}}
	var sessions []string
	order := map[string][]string{}
	for _, r := range runs {
		if _, seen := order[r.Session]; !seen {
			sessions = append(sessions, r.Session)
		}
		side := "?"
		if r.Side != "" {
			side = strings.ToUpper(r.Side[:1])
		}
		order[r.Session] = append(order[r.Session], side)
		if r.Result != nil && r.Result.Perfgate != nil && r.Result.Perfgate.Environment.Commit != "" {
			il.Commits[r.Side] = r.Result.Perfgate.Environment.Commit
		}
	}
	for _, s := range sessions {
		il.Orders = append(il.Orders, fmt.Sprintf("job %s: %s", s, strings.Join(order[s], " ")))
	}
	return il
}

// PairFiles is the Interleaved evidence of an interleaved job's result
// files, named in any order, as `perfgate compare --paired` reads them: the
// places the agent wrote into each result (job, side, pair, position) make
// them the server's sided runs, in the order the jobs ran them, so engine
// starts shared by neighbouring runs are known and the decision is the
// server's. Files without places (plain `perfgate bench` output) are
// paired in file order, each run its own start, with a note that the
// server may decide otherwise.
func PairFiles(base, head []*result.Result) (*Interleaved, error) {
	all := append(append([]*result.Result(nil), base...), head...)
	placed := 0
	for _, r := range all {
		if r.Perfgate != nil && r.Perfgate.Place != nil && r.Perfgate.Place.Side != "" {
			placed++
		}
	}
	switch placed {
	case len(all):
		for i, r := range base {
			if r.Perfgate.Place.Side != gate.SideBase {
				return nil, fmt.Errorf("baseline run %d is a %s run of job %d", i+1, r.Perfgate.Place.Side, r.Perfgate.Place.Job)
			}
		}
		for i, r := range head {
			if r.Perfgate.Place.Side != gate.SideHead {
				return nil, fmt.Errorf("candidate run %d is a %s run of job %d", i+1, r.Perfgate.Place.Side, r.Perfgate.Place.Job)
			}
		}
		sided, err := gate.SidedRunsOf(all)
		if err != nil {
			return nil, err
		}
		il := Sided(inRunOrder(sided))
		return &il, nil
	case 0:
		if len(base) != len(head) {
			return nil, fmt.Errorf("needs as many baseline runs as candidate runs, got %d and %d", len(base), len(head))
		}
		pairs := make([]gate.Pair, len(base))
		for i := range pairs {
			pairs[i] = gate.Pair{Session: "1", Index: i, Base: base[i], Head: head[i]}
		}
		return &Interleaved{Pairs: pairs, Commits: map[string]string{},
			PairNotes: []string{"the result files carry no place in a job (perfgate.place): pairs were taken in file order and each run counted as its own engine start; the server, which knows the order, may decide otherwise"}}, nil
	}
	return nil, fmt.Errorf("%d of %d runs carry their place in a job: give all of one job's files, or none", placed, len(all))
}

// HistoryFiles groups placed history runs into their jobs, newest job
// first, as the server's Interleaved.History holds them; none when the
// runs carry no places (stored history, which Input.History carries).
func HistoryFiles(runs []*result.Result) [][]gate.SidedRun {
	sided, err := gate.SidedRunsOf(runs)
	if err != nil || len(sided) == 0 {
		return nil
	}
	sided = inRunOrder(sided)
	var out [][]gate.SidedRun
	for _, r := range sided {
		if n := len(out); n == 0 || out[n-1][0].Session != r.Session {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], r)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// inRunOrder sorts sided runs job by job (by job number) and each job's by
// its position, as the store lists them.
func inRunOrder(runs []gate.SidedRun) []gate.SidedRun {
	out := append([]gate.SidedRun(nil), runs...)
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Session != out[b].Session {
			return gate.LessSession(out[a].Session, out[b].Session)
		}
		return out[a].Seq < out[b].Seq
	})
	return out
}
