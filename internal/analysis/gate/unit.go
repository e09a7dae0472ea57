package gate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// OutlierSigmas is how far, in robust standard deviations (the MAD of the
// job's pair ratios), a pair must lie from the job's median ratio to be
// left out as an outlier: a whole run that went wrong (a neighbour's
// burst, a stalled request). At most one pair in OutlierShare per job is
// left out — the rule's breakdown point — so noise cannot talk itself
// down: a second bad pair stays in and widens the variance.
const (
	OutlierSigmas = 4.5
	OutlierShare  = 8
)

// outlierScaleFloor keeps a job of identical synthetic runs from calling
// a 0.3% wobble an outlier.
const outlierScaleFloor = 0.003

// pairValue is one pair's values of a metric in the test's space.
type pairValue struct {
	session        string
	index          int
	bStart, hStart int
	b, h           float64
}

func (v pairValue) r() float64 { return v.h - v.b }

// paired estimates one metric's change in an interleaved job from the
// engine starts (or, when every run had its own start, from the pairs),
// with the job's own variance, which the history may widen but never
// narrow.
func (j *judge) paired(m config.Metric, pairs []Pair, hist []Session, pairHist [][]Pair) (estimate, string) {
	pv, missing := j.pairValues(m, pairs)
	if len(pv) < MinPairs {
		return estimate{}, fmt.Sprintf("missing in %d of %d pairs: fewer than %d left", missing, len(pairs), MinPairs)
	}
	var how []string
	if missing > 0 {
		how = append(how, fmt.Sprintf("%d pair(s) without a value left out", missing))
	}
	if !m.Absolute {
		var out []string
		pv, out = dropOutlierPairs(pv, j.pairScale(m, pairHist))
		how = append(how, out...)
	}
	own := unitEstimate(pv)
	priorVar, priorDF := j.pairPrior(m, hist, pairHist)
	v := own.v
	if nu0 := math.Min(PairPriorDF, priorDF); nu0 > 0 {
		// The history may widen the job's variance, never narrow it: a
		// quiet history does not excuse a noisy job.
		v = math.Max(v, (nu0*priorVar+own.df*own.v)/(nu0+own.df))
		if v > own.v*(1+1e-9) {
			how = append(how, fmt.Sprintf("variance widened to the history's (%.2f%% vs the job's %.2f%% per pair)", 100*math.Sqrt(v), 100*math.Sqrt(own.v)))
		}
	}
	v = math.Max(v, 2*j.floor(m))
	p := float64(len(pv))
	se := math.Sqrt(v / p)
	return estimate{
		d:       own.d,
		se:      se,
		df:      own.df,
		band:    j.sigmas * se,
		medianD: math.NaN(),
		runSD:   math.Sqrt(v / 2),
		pairSD:  math.Sqrt(v),
		n:       len(pv),
		how:     strings.Join(append([]string{own.how}, how...), "; "),
	}, ""
}

// pairValues reads each pair's values; a pair one of whose runs lacks the
// metric (or has a zero, NaN or infinite value) is left out, not the metric.
func (j *judge) pairValues(m config.Metric, pairs []Pair) ([]pairValue, int) {
	var out []pairValue
	missing := 0
	for _, p := range pairs {
		b, okB := j.value(p.Base, m)
		h, okH := j.value(p.Head, m)
		if !okB || !okH {
			missing++
			continue
		}
		out = append(out, pairValue{session: p.Session, index: p.Index, bStart: p.BaseStart, hStart: p.HeadStart,
			b: transform(m, b), h: transform(m, h)})
	}
	return out, missing
}

// value is one run's value of a metric, when usable.
func (j *judge) value(r *result.Result, m config.Metric) (float64, bool) {
	v, ok := runValue(r, m, j.cache)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) || (!m.Absolute && v <= 0) {
		return 0, false
	}
	return v, true
}

// dropOutlierPairs leaves out, per job, the pairs whose ratio lies beyond
// OutlierSigmas robust standard deviations of the job's median ratio, at
// most one in OutlierShare. The robust SD is the job's own, but never
// below floor (the typical job's of the history, see pairScale): the MAD
// of 8 ratios is small by chance often enough that on clean normal runs
// a plain pair was left out of 6.5% of jobs, and the variance with it.
func dropOutlierPairs(pv []pairValue, floor float64) ([]pairValue, []string) {
	floor = math.Max(floor, outlierScaleFloor)
	bySession := map[string][]int{}
	var order []string
	for i, v := range pv {
		if _, ok := bySession[v.session]; !ok {
			order = append(order, v.session)
		}
		bySession[v.session] = append(bySession[v.session], i)
	}
	drop := map[int]bool{}
	var notes []string
	for _, s := range order {
		idx := bySession[s]
		r := make([]float64, len(idx))
		for k, i := range idx {
			r[k] = pv[i].r()
		}
		scale := math.Max(stats.MADScale(r), floor)
		med := stats.Median(r)
		for _, k := range stats.Outliers(r, OutlierSigmas, floor, len(r)/OutlierShare) {
			drop[idx[k]] = true
			notes = append(notes, fmt.Sprintf("outlier pair %d of job %s left out (ratio %+.1f%%, %.1f robust SDs from the job's median; at most 1 pair in %d)",
				pv[idx[k]].index, s, 100*math.Expm1(r[k]-med), math.Abs(r[k]-med)/scale, OutlierShare))
		}
	}
	if len(drop) == 0 {
		return pv, nil
	}
	out := make([]pairValue, 0, len(pv)-len(drop))
	for i, v := range pv {
		if !drop[i] {
			out = append(out, v)
		}
	}
	return out, notes
}

// unit is an estimate from one design: the change d, the variance v of
// one pair's worth of evidence (so that SE² = v/P), its degrees of
// freedom, and how it was made.
type unit struct {
	d, v, df float64
	how      string
}

// unitEstimate picks the experimental unit. When every run had an engine
// start of its own, the pairs are independent and the paired t applies.
// When runs share starts (the agent's B | H H | B B | … order), the start
// is the unit: each start's mean, per job the difference of the head
// starts' mean and the base starts' mean, the variance from the starts'
// spread around their side's mean in their job (job shifts cancel), and
// the jobs combined by their information.
func unitEstimate(pv []pairValue) unit {
	p := float64(len(pv))
	if !sharedStarts(pv) {
		r := make([]float64, len(pv))
		for i, v := range pv {
			r[i] = v.r()
		}
		return unit{d: stats.Mean(r), v: stats.SumSq(r) / (p - 1), df: p - 1,
			how: fmt.Sprintf("paired t on %d pair ratios (an engine start per run)", len(pv))}
	}
	type key struct {
		session string
		head    bool
		start   int
	}
	sums := map[key][2]float64{}
	var sessions []string
	seen := map[string]bool{}
	for i, v := range pv {
		for _, side := range []bool{false, true} {
			st, x := v.bStart, v.b
			if side {
				st, x = v.hStart, v.h
			}
			if st == 0 {
				st = -1 - 2*i // unknown: a start of its own
				if side {
					st--
				}
			}
			k := key{v.session, side, st}
			s := sums[k]
			sums[k] = [2]float64{s[0] + x, s[1] + 1}
		}
		if !seen[v.session] {
			seen[v.session] = true
			sessions = append(sessions, v.session)
		}
	}
	means := map[string][2][]float64{}
	keys := make([]key, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].session != keys[b].session {
			return keys[a].session < keys[b].session
		}
		if keys[a].head != keys[b].head {
			return !keys[a].head
		}
		return keys[a].start < keys[b].start
	})
	for _, k := range keys {
		s := sums[k]
		side := 0
		if k.head {
			side = 1
		}
		mm := means[k.session]
		mm[side] = append(mm[side], s[0]/s[1])
		means[k.session] = mm
	}
	var wSum, dSum, ss, df float64
	starts := 0
	for _, s := range sessions {
		mm := means[s]
		nb, nh := len(mm[0]), len(mm[1])
		starts += nb + nh
		if nb == 0 || nh == 0 {
			continue
		}
		w := 1 / (1/float64(nb) + 1/float64(nh))
		wSum += w
		dSum += w * (stats.Mean(mm[1]) - stats.Mean(mm[0]))
		ss += stats.SumSq(mm[0]) + stats.SumSq(mm[1])
		df += float64(nb + nh - 2)
	}
	if df < 1 || wSum == 0 {
		r := make([]float64, len(pv))
		for i, v := range pv {
			r[i] = v.r()
		}
		return unit{d: stats.Mean(r), v: stats.SumSq(r) / (p - 1), df: p - 1,
			how: fmt.Sprintf("paired t on %d pair ratios (too few engine starts to use them)", len(pv))}
	}
	se2 := ss / df / wSum
	return unit{d: dSum / wSum, v: se2 * p, df: df,
		how: fmt.Sprintf("%d pairs in %d engine starts: the start is the unit (df %.0f)", len(pv), starts, df)}
}

// sharedStarts reports whether two runs of one side share an engine start.
func sharedStarts(pv []pairValue) bool {
	type key struct {
		session string
		head    bool
		start   int
	}
	seen := map[key]bool{}
	for _, v := range pv {
		for _, k := range []key{{v.session, false, v.bStart}, {v.session, true, v.hStart}} {
			if k.start == 0 {
				continue
			}
			if seen[k] {
				return true
			}
			seen[k] = true
		}
	}
	return false
}

// pairPrior is the history's variance of one pair's worth of evidence
// under the same estimator, and its degrees of freedom: earlier
// interleaved jobs of the same setup, else twice the run-to-run variance
// of the history sessions. It can only widen the job's own (see paired).
func (j *judge) pairPrior(m config.Metric, hist []Session, pairHist [][]Pair) (float64, float64) {
	var ss, df float64
	for _, set := range pairHist {
		pv, _ := j.pairValues(m, judgeablePairs(set))
		if len(pv) < 3 {
			continue
		}
		if !m.Absolute {
			pv, _ = dropOutlierPairs(pv, 0)
		}
		u := unitEstimate(pv)
		ss += u.v * u.df
		df += u.df
	}
	if df > 0 {
		return ss / df, df
	}
	var p pooled
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

// judgeablePairs is the pairs of an earlier job whose two runs are both
// there and valid: what the history's pair estimates are made of.
func judgeablePairs(set []Pair) []Pair {
	var good []Pair
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
		good = append(good, pr)
	}
	return good
}

// pairScale is the robust SD of pair ratios in a typical earlier job of
// the same setup: the median over the history's interleaved jobs of each
// job's 1.4826·MAD of its ratios; 0 without such a history.
func (j *judge) pairScale(m config.Metric, pairHist [][]Pair) float64 {
	var scales []float64
	for _, set := range pairHist {
		pv, _ := j.pairValues(m, judgeablePairs(set))
		if len(pv) < MinPairs {
			continue
		}
		r := make([]float64, len(pv))
		for i, v := range pv {
			r[i] = v.r()
		}
		scales = append(scales, stats.MADScale(r))
	}
	if len(scales) == 0 {
		return 0
	}
	return stats.Median(scales)
}

// historyFields are what a history set must share with the runs judged
// to speak for their noise: the card model and its settings, the engine
// and the load. Another card of the same model is the same setup.
var historyFields = func() []envField {
	var out []envField
	for _, f := range perfgateFields {
		if f.name != "gpu_uuid" {
			out = append(out, f)
		}
	}
	return out
}()

// sameSetup keeps the history measured on the setup of ref (a run of the
// current comparison) and counts what it left out. A run without
// perfgate's section says nothing of its setup and is kept.
func (j *judge) sameSetup(ref *result.Result, sessions []Session, paired [][]Pair) ([]Session, [][]Pair, int) {
	match := func(r *result.Result) bool {
		if ref == nil || ref.Perfgate == nil || r == nil || r.Perfgate == nil {
			return true
		}
		for _, f := range historyFields {
			if f.name == "engine_image" && j.design == DesignInterleaved {
				continue // base and head images differ by design; the sim flag and the load stay
			}
			if f.get(ref) != f.get(r) {
				return false
			}
		}
		return true
	}
	var outS []Session
	var outP [][]Pair
	dropped := 0
	for _, s := range sessions {
		if len(s.Runs) > 0 && match(s.Runs[0]) {
			outS = append(outS, s)
		} else {
			dropped++
		}
	}
	for _, set := range paired {
		if len(set) > 0 && match(set[0].Base) {
			outP = append(outP, set)
		} else {
			dropped++
		}
	}
	return outS, outP, dropped
}

// Contention thresholds of the benchmark client's check on itself: below
// client-bound (which excludes the run), yet a sign that the runner was
// busy while it measured.
const (
	contendedCPU   = 0.5  // share of the client's cores busy
	contendedLagMS = 50.0 // p99 of how late requests were sent
)

// contention says, when some runs were measured on a contended runner,
// how many and by which sign; "" otherwise.
func contention(runs []*result.Result) string {
	n, cpu, lag := 0, 0.0, 0.0
	for _, r := range runs {
		if r == nil || r.Perfgate == nil || r.Perfgate.Client == nil || r.Perfgate.Client.CPUShared {
			continue
		}
		c := r.Perfgate.Client
		if c.CPUUtilization >= contendedCPU || c.ScheduleLagP99MS >= contendedLagMS {
			n++
			cpu, lag = math.Max(cpu, c.CPUUtilization), math.Max(lag, c.ScheduleLagP99MS)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("the runner was contended in %d of %d runs (benchmark client up to %.0f%% of its cores, requests sent up to %.0f ms late at p99): their noise is in the variance the verdict used, so the interval is wider than on an idle runner", n, len(runs), 100*cpu, lag)
}
