package gate

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/stats"
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
			return lessSession(order[a].session, order[b].session)
		}
		return order[a].pair < order[b].pair
	})
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
			HeadFirst: s[1].Seq < s[0].Seq})
	}
	return pairs, notes, nil
}

// lessSession orders numeric session names (job IDs) as numbers.
func lessSession(a, b string) bool {
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

// ComparePaired judges an interleaved job: per gated metric, a paired t
// test on the per-pair log ratios head/base. Their variance is shrunk
// toward the history's,
//
//	σ̂² = (ν₀·σ_h² + (P−1)·s²) / (ν₀ + P − 1),  t with ν₀ + P − 1 df,
//
// with ν₀ = min(16, the history's df): σ_h² is the residual spread of
// earlier interleaved jobs' ratios (History.Paired), else twice the
// history sessions' run-to-run variance, else there is no prior (ν₀ = 0).
// Session shifts and slow drift cancel within a pair, so there is no
// session term. The three-zone rule, Holm and the look budget are
// Compare's.
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
	hist := j.historySessions(opt.History)
	rep.HistorySessions = len(hist) + len(opt.History.Paired)
	if len(good) > 0 {
		var notes []string
		rep.Mismatches, notes = checkEnvironment(base, head, pairFields)
		rep.Notes = append(rep.Notes, notes...)
	}
	if len(good) < MinPairs {
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few valid pairs: %d; the gate needs at least %d", len(good), MinPairs))
		rep.NeedMoreRuns = max(MinPairs, tier.Pairs)
		return j.finish(rep, Inconclusive)
	}
	measure := func(m config.Metric) (estimate, string) {
		return j.paired(m, base, head, hist, opt.History.Paired)
	}
	j.measureAll(rep, measure, func(m config.Metric) (float64, float64) { return j.medianOf(base, m), j.medianOf(head, m) })
	return j.finish(rep, "")
}

// paired estimates one metric's change from per-pair ratios.
func (j *judge) paired(m config.Metric, base, head []*result.Result, hist []Session, pairHist [][]Pair) (estimate, string) {
	xb, okB := j.logValues(base, m)
	xh, okH := j.logValues(head, m)
	if !okB || !okH {
		return estimate{}, "missing in some runs"
	}
	r := make([]float64, len(xb))
	for i := range r {
		r[i] = xh[i] - xb[i]
	}
	priorVar, priorDF := j.pairPrior(m, hist, pairHist)
	nu0 := math.Min(PairPriorDF, priorDF)
	p := float64(len(r))
	own := stats.SumSq(r)
	v := own / (p - 1)
	if nu0 > 0 {
		v = (nu0*priorVar + own) / (nu0 + p - 1)
	}
	v = math.Max(v, 2*j.floor(m))
	bandVar := stats.Variance(r)
	if nu0 > 0 {
		bandVar = priorVar
	}
	bandVar = math.Max(bandVar, 2*j.floor(m))
	return estimate{
		d:       stats.Mean(r),
		se:      math.Sqrt(v / p),
		df:      nu0 + p - 1,
		band:    j.sigmas * math.Sqrt(bandVar/p),
		medianD: math.NaN(),
		runSD:   math.Sqrt(v / 2),
		pairSD:  math.Sqrt(v),
	}, ""
}

// pairPrior is the history's variance of a per-pair log ratio and its
// degrees of freedom: earlier interleaved jobs' residual spread (each
// job's ratios around their own mean), else twice the run-to-run variance
// of the history sessions.
func (j *judge) pairPrior(m config.Metric, hist []Session, pairHist [][]Pair) (float64, float64) {
	var p pooled
	for _, set := range pairHist {
		var b, h []*result.Result
		for _, pr := range set {
			if pr.Base == nil || pr.Head == nil {
				continue
			}
			if _, bad := invalid(pr.Base); bad {
				continue
			}
			if _, bad := invalid(pr.Head); bad {
				continue
			}
			b, h = append(b, pr.Base), append(h, pr.Head)
		}
		xb, okB := j.logValues(b, m)
		xh, okH := j.logValues(h, m)
		if !okB || !okH {
			continue
		}
		r := make([]float64, len(xb))
		for i := range r {
			r[i] = xh[i] - xb[i]
		}
		p.add(r)
	}
	if p.df > 0 {
		return p.variance(), p.df
	}
	for _, s := range hist {
		if x, ok := j.logValues(s.Runs, m); ok {
			p.add(x)
		}
	}
	if p.df > 0 {
		return 2 * p.variance(), p.df
	}
	return 0, 0
}
