package gate

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Pair is one base/head pair of an interleaved job: the two commits ran
// back to back on one card in one engine session.
type Pair struct {
	Session string // the job (engine session) the pair ran in
	Index   int    // the pair's index within its job
	Base    *result.Result
	Head    *result.Result
	// HeadFirst says the head ran first (a balanced ABBA order alternates
	// it, so linear drift cancels over the pairs).
	HeadFirst bool
	// BaseStart and HeadStart number the engine start each run was
	// measured in, within its session (1, 2, …; 0: unknown, taken as a
	// start of its own). The agent starts a side's engine when the order
	// changes side (B | H H | B B | …), so neighbouring pairs share starts
	// and a start's state — what the engine happened to allocate, compile
	// or schedule — is common to two runs: the start, not the run, is the
	// experimental unit.
	BaseStart, HeadStart int
}

// Sides of an interleaved run, as the agent uploads them.
const (
	SideBase = "base"
	SideHead = "head"
)

// SidedRun is one measured run of an interleaved job as uploaded: its
// side, its pair index and the job it ran in. Seq, when known, is the
// run's position in the job and gives each pair's order.
type SidedRun struct {
	Session string
	Side    string // SideBase or SideHead
	Pair    int
	Seq     int
	Result  *result.Result
}

// MakePairs matches the base and head runs of interleaved jobs by (session,
// pair index), in session then index order. A run whose partner is
// missing (a lost or failed run) is left out and named in the returned
// notes; a side other than base/head, or two runs on one side of a pair,
// is an error.
func MakePairs(runs []SidedRun) ([]Pair, []string, error) {
	type key struct {
		session string
		pair    int
	}
	byKey := map[key]*[2]*SidedRun{}
	var order []key
	for i := range runs {
		r := &runs[i]
		side := 0
		switch r.Side {
		case SideBase:
		case SideHead:
			side = 1
		default:
			return nil, nil, fmt.Errorf("pair runs: run %d has side %q, want %q or %q", i+1, r.Side, SideBase, SideHead)
		}
		if r.Result == nil {
			return nil, nil, fmt.Errorf("pair runs: run %d (%s, pair %d) has no result", i+1, r.Side, r.Pair)
		}
		k := key{r.Session, r.Pair}
		slot, ok := byKey[k]
		if !ok {
			slot = &[2]*SidedRun{}
			byKey[k] = slot
			order = append(order, k)
		}
		if slot[side] != nil {
			return nil, nil, fmt.Errorf("pair runs: two %s runs for pair %d of session %s", r.Side, r.Pair, r.Session)
		}
		slot[side] = r
	}
	sort.SliceStable(order, func(a, b int) bool {
		if order[a].session != order[b].session {
			return LessSession(order[a].session, order[b].session)
		}
		return order[a].pair < order[b].pair
	})
	starts := startsOf(runs)
	var pairs []Pair
	var notes []string
	for _, k := range order {
		s := byKey[k]
		if s[0] == nil || s[1] == nil {
			have := SideBase
			if s[0] == nil {
				have = SideHead
			}
			notes = append(notes, fmt.Sprintf("pair %d of session %s has only its %s run: left out", k.pair, k.session, have))
			continue
		}
		pairs = append(pairs, Pair{Session: k.session, Index: k.pair, Base: s[0].Result, Head: s[1].Result,
			HeadFirst: s[1].Seq < s[0].Seq, BaseStart: starts[s[0]], HeadStart: starts[s[1]]})
	}
	return pairs, notes, nil
}

// startsOf numbers the engine starts of each session's runs: in the
// order of Seq, a new start whenever the side changes. A session whose
// runs do not have distinct positions gets none (0: each run its own).
func startsOf(runs []SidedRun) map[*SidedRun]int {
	bySession := map[string][]*SidedRun{}
	for i := range runs {
		bySession[runs[i].Session] = append(bySession[runs[i].Session], &runs[i])
	}
	out := map[*SidedRun]int{}
	for _, rs := range bySession {
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].Seq < rs[b].Seq })
		distinct := true
		for i := 1; i < len(rs); i++ {
			if rs[i].Seq == rs[i-1].Seq {
				distinct = false
			}
		}
		if !distinct {
			continue
		}
		n := 0
		for i, r := range rs {
			if i == 0 || r.Side != rs[i-1].Side {
				n++
			}
			out[r] = n
		}
	}
	return out
}

// LessSession orders numeric session names (job IDs) as numbers, others
// as strings: the order the store lists jobs in.
func LessSession(a, b string) bool {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

// pairFields are the environment fields base and head of one pair must
// share: everything but the engine's identity, which is what differs.
var pairFields = func() []envField {
	var out []envField
	for _, f := range perfgateFields {
		if f.name != "engine_image" {
			out = append(out, f)
		}
	}
	return out
}()

// ComparePaired judges an interleaved job per gated metric from the
// engine starts when runs share them (the agent's B | H H | B B | … order),
// else from the independent pairs (see unitEstimate). The job's own
// variance always counts; the history — earlier interleaved jobs of the
// same setup (History.Paired, under the same estimator), else twice the
// run-to-run variance of the history sessions — may widen it, pooled with
// ν₀ = min(16, its df), never narrow it, and lends no degrees of freedom.
// Outlier pairs are left out (OutlierSigmas, at most one in OutlierShare
// per job); a pair with a missing value is left out. Session shifts and
// slow drift cancel within a job, so there is no session term. The
// three-zone rule, Holm and the look budget are Compare's.
func ComparePaired(pairs []Pair, tier config.Tier, opt Options) (*Report, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("compare pairs: no pairs")
	}
	j, rep, err := newJudge(tier, opt, DesignInterleaved)
	if err != nil {
		return nil, err
	}
	var good []Pair
	sessions := map[string]bool{}
	for _, p := range pairs {
		if p.Base == nil || p.Head == nil {
			return nil, fmt.Errorf("compare pairs: pair %d of session %s lacks a run", p.Index, p.Session)
		}
		why := ""
		if w, bad := invalid(p.Base); bad {
			why = "base run: " + w
		} else if w, bad := invalid(p.Head); bad {
			why = "head run: " + w
		}
		if why != "" {
			rep.ExcludedRuns = append(rep.ExcludedRuns, fmt.Sprintf("pair %d of session %s: %s", p.Index, p.Session, why))
			continue
		}
		good = append(good, p)
		sessions[p.Session] = true
	}
	base, head := make([]*result.Result, len(good)), make([]*result.Result, len(good))
	for i, p := range good {
		base[i], head[i] = p.Base, p.Head
	}
	rep.Pairs, rep.BaselineRuns, rep.CandidateRuns, rep.CandidateSessions = len(good), len(good), len(good), len(sessions)
	var hist []Session
	var pairHist [][]Pair
	if len(good) > 0 {
		var dropped int
		hist, pairHist, dropped = j.sameSetup(good[0].Base, j.historySessions(opt.History), opt.History.Paired)
		if dropped > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d history set(s) left out of the noise prior: another card, driver, engine or load", dropped))
		}
	}
	rep.HistorySessions = len(hist) + len(pairHist)
	if len(good) > 0 {
		var notes []string
		rep.Mismatches, notes = checkEnvironment(base, head, pairFields)
		rep.Notes = append(rep.Notes, notes...)
	}
	if c := contention(append(append([]*result.Result(nil), base...), head...)); c != "" {
		rep.Notes = append(rep.Notes, c)
	}
	if d := delivery(append(append([]*result.Result(nil), base...), head...)); d != "" {
		rep.Notes = append(rep.Notes, d)
	}
	if len(good) < MinPairs {
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few valid pairs: %d; the gate needs at least %d", len(good), MinPairs))
		rep.NeedMoreRuns = max(MinPairs, tier.Pairs)
		return j.finish(rep, Inconclusive)
	}
	measure := func(m config.Metric) (estimate, string) {
		return j.paired(m, good, hist, pairHist)
	}
	j.measureAll(rep, measure, func(m config.Metric) sideValues { return j.sides(m, base, head) })
	return j.finish(rep, "")
}

// SidedRunsOf reads interleaved runs from the places the agent wrote into
// their results (result.Place): the job is the session, and side, pair and
// position are the ones the server pairs by. It fails, naming the run,
// when a run has no place or no side.
func SidedRunsOf(runs []*result.Result) ([]SidedRun, error) {
	out := make([]SidedRun, 0, len(runs))
	for i, r := range runs {
		if r == nil || r.Perfgate == nil || r.Perfgate.Place == nil || r.Perfgate.Place.Side == "" {
			return nil, fmt.Errorf("run %d has no place in an interleaved job (result files of perfgate's agent carry perfgate.place)", i+1)
		}
		p := r.Perfgate.Place
		out = append(out, SidedRun{Session: strconv.FormatInt(p.Job, 10), Side: p.Side, Pair: p.Pair, Seq: p.Seq, Result: r})
	}
	return out, nil
}
