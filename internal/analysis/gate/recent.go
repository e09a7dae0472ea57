package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// DefaultRecent is how many of the latest baselines the ratchet's
// reference spans.
const DefaultRecent = 3

// CompareRecent judges runs against the median of the latest sessions of
// opt.History (newest first; opt.Recent of them, default 3): the "only
// moves up" rule of baseline promotion. One lucky baseline does not raise
// the bar, and one unlucky one does not lower it. Per metric, the
// reference is the median of those sessions' mean log values, and
//
//	Var = σ_s² + σ_r²/k + c_K·(σ_s² + σ_r²·mean(1/n))
//
// where c_K is the variance of a median of K means relative to one mean,
// σ_s² the session variance of all history sessions (around the tier's
// session_noise) and σ_r² the pooled run-to-run variance.
func CompareRecent(runs []*result.Result, tier config.Tier, opt Options) (*Report, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("compare with recent baselines: no runs")
	}
	j, rep, err := newJudge(tier, opt, DesignRecent)
	if err != nil {
		return nil, err
	}
	hist := j.historySessions(opt.History)
	if len(hist) == 0 {
		return nil, fmt.Errorf("compare with recent baselines: no earlier session with two valid runs")
	}
	k := opt.Recent
	if k <= 0 {
		k = DefaultRecent
	}
	recent := hist[:min(k, len(hist))]
	cand, _ := validRuns("candidate", runs, nil, rep)
	rep.CandidateRuns, rep.HistorySessions = len(cand), len(hist)
	for _, s := range recent {
		rep.BaselineRuns += len(s.Runs)
	}
	if len(cand) > 0 {
		var notes []string
		rep.Mismatches, notes = checkEnvironment(recent[0].Runs, cand, perfgateFields)
		rep.Notes = append(rep.Notes, notes...)
	}
	if len(cand) < MinRuns {
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few valid runs: %d; the gate needs at least %d", len(cand), MinRuns))
		return j.finish(rep, Inconclusive)
	}
	if len(recent) > 1 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("compared with the median of the %d latest baselines (%s … %s)", len(recent), recent[0].Label, recent[len(recent)-1].Label))
	}
	measure := func(m config.Metric) (estimate, string) { return j.recent(m, cand, recent, hist) }
	sides := func(m config.Metric) sideValues {
		// The reference is the median of the recent baselines' means,
		// the value the estimate is taken from.
		var ref, means []float64
		for _, s := range recent {
			ref = append(ref, j.medianOf(s.Runs, m))
			if x, ok := j.logValues(s.Runs, m); ok {
				means = append(means, stats.Mean(x))
			}
		}
		return sideValues{baseCentre: centre(m, stats.Median(means)), baseMedian: stats.Median(ref), candMed: j.medianOf(cand, m)}
	}
	j.measureAll(rep, measure, sides)
	return j.finish(rep, "")
}

func (j *judge) recent(m config.Metric, cand []*result.Result, recent, hist []Session) (estimate, string) {
	xc, ok := j.logValues(cand, m)
	if !ok {
		return estimate{}, "missing in some runs"
	}
	var run, histRun pooled
	run.add(xc)
	var means, recentMeans []float64
	var ns []int
	invN := 0.0
	for i, s := range hist {
		x, ok := j.logValues(s.Runs, m)
		if !ok {
			if i < len(recent) {
				return estimate{}, "missing in a recent baseline's runs"
			}
			continue
		}
		histRun.add(x)
		means = append(means, stats.Mean(x))
		ns = append(ns, len(x))
		if i < len(recent) {
			recentMeans = append(recentMeans, stats.Mean(x))
			invN += 1 / float64(len(x))
		}
	}
	run.ss += histRun.ss
	run.df += histRun.df
	runVar := math.Max(run.variance(), j.floor(m))
	sessVar, sessDF := sessionVariance(means, ns, runVar, j.sessionPrior(m), SessionPriorDF)
	kRef := len(recentMeans)
	c := medianVarianceFactor(kRef)
	invN /= float64(kRef)
	k := float64(len(xc))
	a := runVar * (1/k + c*invN)
	b := sessVar * (1 + c)
	bandVar := math.Max(histRun.variance(), j.floor(m))
	if histRun.df == 0 {
		bandVar = runVar
	}
	return estimate{
		d:         stats.Mean(xc) - stats.Median(recentMeans),
		se:        math.Sqrt(a + b),
		df:        satterthwaite(a, run.df, b, sessDF),
		band:      j.sigmas * math.Sqrt(bandVar*(1/k+c*invN)+b),
		medianD:   math.NaN(),
		runSD:     math.Sqrt(runVar),
		sessionSD: math.Sqrt(sessVar),
	}, ""
}
