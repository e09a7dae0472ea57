package gate

import (
	"math"
	"sort"
	"strconv"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// The simulation's reference tests (see mixed.go), run on the runs each
// simulated PR ended with — the gate's evidence at its last look — and
// calibrated on the stress's A/A PRs to the tier's α, so that their power
// and the gate's are compared at no more false alarms than the gate is
// allowed.
const (
	RefOracle = iota // the mixed model with the true variance components (the information limit)
	RefREML          // the mixed model, its variances estimated from the PR's runs (the best practical test)
	RefOnce          // the gate's own estimator and t, once at α on the same runs: no looks, no Holm, no line
	nRefs
)

// RefNames name the reference tests in tables.
var RefNames = [nRefs]string{"oracle mixed model", "REML mixed model", "gate's t once at α"}

// refPs are one PR's one-sided p-values under the reference tests; NaN
// where a test has nothing to say (the oracle under a request-level
// world, whose run variance has no closed form).
type refPs [nRefs]float64

// reference tests the PR's final evidence for a worse head on the gated
// metric.
func (s *simulator) reference(ev *evidence, hist History) refPs {
	out := refPs{math.NaN(), math.NaN(), math.NaN()}
	if s.cfg.Design != DesignInterleaved {
		return out
	}
	m, ok := config.LookupMetric(s.cfg.Metric)
	if !ok {
		return out
	}
	j := &judge{cache: newSeriesCache()}
	runs := evidenceRuns(j, m, ev.pairs)
	if c, ok := s.trueComponents(ev); ok {
		out[RefOracle] = oracleGLS(runs, c).p()
	}
	out[RefREML] = remlFit(runs).p()
	if pv, _ := j.pairValues(m, ev.pairs); len(pv) >= MinPairs {
		pv, _ = dropOutlierPairs(pv, j.pairScale(m, hist.Paired))
		u := unitEstimate(pv)
		out[RefOnce], _ = oneSided(u.d, math.Sqrt(u.v/float64(len(pv))), u.df)
	}
	return out
}

// evidenceRuns lays the pairs' runs out by job, start and position. A run
// without a usable value is left out alone: its partner still counts (the
// gate drops the pair).
func evidenceRuns(j *judge, m config.Metric, pairs []Pair) []mixedRun {
	jobs := map[string]int{}
	var names []string
	for _, p := range pairs {
		if _, ok := jobs[p.Session]; !ok {
			jobs[p.Session] = 0
			names = append(names, p.Session)
		}
	}
	sort.SliceStable(names, func(a, b int) bool { return LessSession(names[a], names[b]) })
	for i, n := range names {
		jobs[n] = i
	}
	var out []mixedRun
	for k, p := range pairs {
		bPos, hPos := 2*p.Index+1, 2*p.Index+2
		if p.HeadFirst {
			bPos, hPos = hPos, bPos
		}
		for _, side := range []bool{false, true} {
			r, st, pos := p.Base, p.BaseStart, bPos
			if side {
				r, st, pos = p.Head, p.HeadStart, hPos
			}
			if st == 0 {
				st = -1 - 2*k // unknown: a start of its own
				if side {
					st--
				}
			}
			if r == nil {
				continue
			}
			v, ok := j.value(r, m)
			if !ok {
				continue
			}
			out = append(out, mixedRun{job: jobs[p.Session], y: transform(m, v), head: side, start: st, pos: pos})
		}
	}
	return out
}

// trueComponents are the stress's variances of the gated metric as the
// simulator draws them: the engine start, the drift's step, the run's own
// noise (its t tails and outlier runs counted by their variance), the
// head-only noise. A request-level world has no closed form: no oracle.
func (s *simulator) trueComponents(ev *evidence) (mixedComponents, bool) {
	w := s.cfg.World
	if w.Requests > 0 {
		return mixedComponents{}, false
	}
	cv := s.model.CV
	if v, ok := w.CVs[s.key]; ok {
		cv = v
	}
	// A run's noise z is √½ of the noise shared by its metrics (which
	// carries the outlier shift) and √½ of its own, each of unit variance.
	p, sh := s.model.OutlierProb, s.model.OutlierShift
	run := cv * cv * (1 + 0.5*p*(1-p)*sh*sh)
	if k := w.OutlierRuns; k > 0 && ev.size() > 0 {
		// k outlier runs among a job's 2n, at random places.
		q := float64(k) / float64(2*s.cfg.Runs)
		run += q * (1 - q) * w.OutlierSize * w.OutlierSize
	}
	return mixedComponents{Start: w.StartCV * w.StartCV, Drift: s.cfg.Drift * s.cfg.Drift, Run: run, HeadRun: w.HeadCV * w.HeadCV}, true
}

// RefRates are one reference test's rates under a stress.
type RefRates struct {
	// NominalAA is the share of A/A PRs the test calls worse at its own
	// level α: near α when the test is valid.
	NominalAA float64
	// Level is the p-value below which the calibrated test calls a
	// regression: the largest that calls at most α of the A/A PRs.
	Level float64
	// AA is the calibrated test's share of A/A PRs called worse (≤ α).
	AA float64
	// Detection is the calibrated test's share of PRs with a regression
	// called, per delta.
	Detection []float64
	ok        bool
}

// Available reports whether the test ran under the stress.
func (r RefRates) Available() bool { return r.ok }

// calibrate sets a reference test's level on the A/A PRs' p-values and
// measures it on the PRs with a regression.
func calibrate(alpha float64, null []float64, alt [][]float64) RefRates {
	ps := make([]float64, 0, len(null))
	for _, p := range null {
		if !math.IsNaN(p) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return RefRates{}
	}
	sort.Float64s(ps)
	n := float64(len(ps))
	r := RefRates{ok: true}
	r.NominalAA = share(ps, alpha)
	// The level calls k = ⌊α·n⌋ A/A PRs: the k-th smallest p-value, or
	// below it when it ties with the next.
	k := int(math.Floor(alpha * n))
	if k >= len(ps) {
		r.Level = ps[len(ps)-1]
	} else {
		i := k - 1
		for i >= 0 && ps[i] == ps[k] {
			i--
		}
		if i >= 0 {
			r.Level = ps[i]
		} else {
			r.Level = ps[0] / 2
		}
	}
	r.AA = share(ps, r.Level)
	for _, a := range alt {
		r.Detection = append(r.Detection, share(a, r.Level))
	}
	return r
}

// share is the fraction of the p-values at or below level (NaN: not).
func share(ps []float64, level float64) float64 {
	if len(ps) == 0 {
		return math.NaN()
	}
	c := 0
	for _, p := range ps {
		if p <= level {
			c++
		}
	}
	return float64(c) / float64(len(ps))
}

// refLabel prints a rate, "-" when the test did not run.
func refLabel(r RefRates, i int) string {
	if !r.ok || i >= len(r.Detection) || math.IsNaN(r.Detection[i]) {
		return "-"
	}
	return strconv.FormatFloat(100*r.Detection[i], 'f', 1, 64) + "%"
}
