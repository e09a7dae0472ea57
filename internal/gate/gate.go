// Package gate decides whether a candidate's runs regressed against a
// baseline's. The unit of inference is the run: each run gives one value
// per metric (its p99 TPOT, its output tok/s), and the test compares run
// values in log space with a run-to-run variance shrunk toward the
// baseline's A/A history. Per-request samples only give each run's
// within-run uncertainty (shown, and a floor on the variance): pooling
// requests across runs would call every GPU clock shift a regression.
package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/stats"
)

// Verdict is the gate's decision.
type Verdict string

// Verdicts.
const (
	Pass         Verdict = "pass"
	Regression   Verdict = "regression"
	Inconclusive Verdict = "inconclusive"
)

// ExitCode is the CLI's exit status: pass 0, regression 1, inconclusive 2.
func (v Verdict) ExitCode() int {
	switch v {
	case Pass:
		return 0
	case Regression:
		return 1
	default:
		return 2
	}
}

// Per-metric verdicts.
const (
	MetricRegression   = "regression"
	MetricImprovement  = "improvement"
	MetricPass         = "pass" // a real change, inside the threshold
	MetricSame         = "~"    // no change the test can tell from noise
	MetricInconclusive = "inconclusive"
)

// MinRuns is the fewest valid runs per side the gate judges: the median of
// runs and any spread need three.
const MinRuns = 3

// MetricResult is one metric's comparison. Relative metrics report Delta,
// Threshold, NoiseBand and the intervals as fractions (+0.08 = 8% higher);
// absolute metrics (error_rate) as differences in the metric's own unit.
type MetricResult struct {
	Metric    string           `json:"metric"` // config name, e.g. tpot_p99
	Key       string           `json:"key"`    // result key, e.g. p99_tpot_ms
	Unit      string           `json:"unit"`
	Direction config.Direction `json:"direction"`
	// Baseline and Candidate are the medians over each side's runs.
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	Delta     float64 `json:"delta"` // Candidate/Baseline - 1, signed by value, not by worse
	Threshold float64 `json:"threshold"`
	// NoiseBand is NoiseSigmas run-to-run standard deviations of the
	// difference of run means, from the baseline's history.
	NoiseBand float64 `json:"noise_band"`
	// PValue is the two-sided Mann–Whitney U p-value over run values,
	// benchstat's number (informative: with 3+3 runs it cannot go below 0.1).
	PValue float64 `json:"p_value"`
	// HolmP is the Holm-adjusted one-sided p-value of the shrunk t test in
	// the worse direction: the test the gate decides on.
	HolmP float64 `json:"holm_p"`
	// CILow, CIHigh bound the change at the tier's confidence (one-sided
	// bounds at α split across looks), from run-to-run variance.
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// RequestCI is a 95% bootstrap interval of the change from per-request
	// samples alone (within-run error); nil when the files lack them.
	RequestCI     *Interval `json:"request_ci,omitempty"`
	Significant   bool      `json:"significant"`
	Verdict       string    `json:"verdict"`
	Secondary     bool      `json:"secondary"`
	BaselineRuns  int       `json:"baseline_runs"`
	CandidateRuns int       `json:"candidate_runs"`
	Note          string    `json:"note,omitempty"`
}

// Interval is a [Low, High] range of a change.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Mismatch is an environment field on which the runs differ.
type Mismatch struct {
	Field     string `json:"field"`
	Baseline  string `json:"baseline"`
	Candidate string `json:"candidate"`
}

// Report is the gate's answer for one tier.
type Report struct {
	Tier          string         `json:"tier"`
	Verdict       Verdict        `json:"verdict"`
	Metrics       []MetricResult `json:"metrics"`
	Mismatches    []Mismatch     `json:"mismatches,omitempty"`
	ExcludedRuns  []string       `json:"excluded_runs,omitempty"`
	BaselineRuns  int            `json:"baseline_runs"`
	CandidateRuns int            `json:"candidate_runs"`
	// NeedMoreRuns, when the verdict is inconclusive for want of evidence,
	// is the total number of candidate runs to have before deciding again
	// (3→6, 5→10); 0 when more runs would not help.
	NeedMoreRuns int      `json:"need_more_runs,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	Confidence   float64  `json:"confidence"`
}

// Options tune a comparison.
type Options struct {
	// History holds earlier run sets of unchanged code (A/A runs: the
	// baseline against itself); their within-set spread is the prior for
	// the run-to-run variance and sets the noise band.
	History [][]*result.Result
	// Confidence overrides the tier's.
	Confidence float64
	// Looks is how many times one PR's evidence may be judged (the first
	// runs, then once more with the added runs); α is split evenly across
	// them so that adding runs cannot be used to retest until green.
	// Default 2.
	Looks int
	// Seed seeds the per-request bootstrap; results are deterministic.
	Seed uint64
}

// DefaultConfidence is used when neither the tier nor the options set one:
// one-sided α = 0.005 family-wise. At a few hundred gated PRs a month that
// is about one false block a month from the test alone, and the threshold
// and noise band conditions push the real rate far lower (see
// simulate-gate); 0.99 would double it, 0.999 would need ~30% more runs for
// the same power.
const DefaultConfidence = 0.995

// relVarFloor is the smallest run-to-run standard deviation assumed (0.1%
// in log space): identical synthetic runs must not make any difference
// infinitely significant.
const relVarFloor = 1e-3 * 1e-3

const bootstrapReplicates = 400

// Compare judges candidate runs against baseline runs for one tier.
func Compare(baseline, candidate []*result.Result, tier config.Tier, opt Options) (*Report, error) {
	if len(baseline) == 0 {
		return nil, fmt.Errorf("compare: no baseline runs")
	}
	if len(candidate) == 0 {
		return nil, fmt.Errorf("compare: no candidate runs")
	}
	if len(tier.Metrics) == 0 {
		return nil, fmt.Errorf("compare: tier %q gates no metrics", tier.Name)
	}
	conf := opt.Confidence
	if conf == 0 {
		conf = tier.Confidence
	}
	if conf == 0 {
		conf = DefaultConfidence
	}
	if conf <= 0.5 || conf >= 1 {
		return nil, fmt.Errorf("compare: confidence %g outside (0.5, 1)", conf)
	}
	looks := opt.Looks
	if looks <= 0 {
		looks = 2
	}
	rep := &Report{Tier: tier.Name, Confidence: conf}
	base := validRuns("baseline", baseline, rep)
	cand := validRuns("candidate", candidate, rep)
	rep.BaselineRuns, rep.CandidateRuns = len(base), len(cand)
	var history [][]*result.Result
	for _, set := range opt.History {
		if v := validRuns("", set, nil); len(v) >= 2 {
			history = append(history, v)
		}
	}

	var notes []string
	if len(base) > 0 && len(cand) > 0 {
		rep.Mismatches, notes = checkEnvironment(base, cand)
		rep.Notes = append(rep.Notes, notes...)
	}
	if len(base) < MinRuns || len(cand) < MinRuns {
		rep.Verdict = Inconclusive
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few valid runs: %d baseline, %d candidate; the gate needs at least %d on each side", len(base), len(cand), MinRuns))
		if len(cand) < MinRuns {
			rep.NeedMoreRuns = max(MinRuns, tier.Repeats)
		}
		return rep, nil
	}

	j := &judge{
		alpha:  (1 - conf) / float64(looks),
		sigmas: tier.NoiseSigmas,
		cache:  newSeriesCache(),
		rng:    rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15)),
	}
	for _, name := range tier.GatedMetrics() {
		mr, w := j.measure(name, tier.Metrics[name], false, base, cand, history)
		rep.Metrics, j.work = append(rep.Metrics, mr), append(j.work, w)
	}
	for _, name := range tier.SecondaryMetrics() {
		mr, w := j.measure(name, tier.Secondary[name], true, base, cand, history)
		if !w.ok {
			rep.Notes = append(rep.Notes, fmt.Sprintf("secondary metric %s not shown: %s", name, mr.Note))
			continue
		}
		rep.Metrics, j.work = append(rep.Metrics, mr), append(j.work, w)
	}
	j.decide(rep.Metrics)
	rep.Verdict, rep.NeedMoreRuns = verdict(rep, tier)
	return rep, nil
}

// validRuns drops runs whose GPU telemetry marked them untrustworthy
// (throttling, a clock change, another process on the card) and records
// them in the report.
func validRuns(side string, runs []*result.Result, rep *Report) []*result.Result {
	var out []*result.Result
	unknown := 0
	for i, r := range runs {
		if r == nil {
			continue
		}
		g := (*result.GPUSummary)(nil)
		if r.Perfgate != nil {
			g = r.Perfgate.GPU
		}
		if g != nil && !g.Valid && (g.Available || len(g.Invalid) > 0) {
			if rep != nil {
				why := "marked invalid"
				if len(g.Invalid) > 0 {
					why = fmt.Sprint(g.Invalid)
				}
				rep.ExcludedRuns = append(rep.ExcludedRuns, fmt.Sprintf("%s run %d: %s", side, i+1, why))
			}
			continue
		}
		if g != nil && !g.Available {
			unknown++
		}
		out = append(out, r)
	}
	if unknown > 0 && rep != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d %s run(s) have no GPU telemetry: their validity is unknown", unknown, side))
	}
	return out
}

// judge holds what the metrics of one comparison share.
type judge struct {
	alpha  float64 // one-sided, per look
	sigmas float64
	cache  *seriesCache
	rng    *rand.Rand

	// Per metric, parallel to Report.Metrics, read by decide.
	work []metricWork
}

// metricWork is the state decide needs beyond the MetricResult.
type metricWork struct {
	ok        bool
	d         float64 // mean transformed change, positive = worse
	medianD   float64 // the same for the medians shown, positive = worse
	tau       float64 // threshold in the test's space
	band      float64 // noise band in the test's space
	upper     float64 // one-sided upper bound of d at α
	pWorse    float64 // one-sided p of "d > 0"
	pBetter   float64 // one-sided p of "d < 0"
	secondary bool
}

func (j *judge) measure(name string, th config.Threshold, secondary bool, base, cand []*result.Result, history [][]*result.Result) (MetricResult, metricWork) {
	m, known := config.LookupMetric(name)
	mr := MetricResult{Metric: name, Key: m.Key, Unit: m.Unit, Direction: th.Direction, Threshold: th.Limit,
		Secondary: secondary, BaselineRuns: len(base), CandidateRuns: len(cand)}
	if mr.Direction == "" {
		mr.Direction = m.Natural
	}
	w := metricWork{secondary: secondary}
	if !known {
		mr.Verdict, mr.Note = MetricInconclusive, "unknown metric"
		return mr, w
	}
	vb, okB := j.values(base, m)
	vc, okC := j.values(cand, m)
	if !okB || !okC {
		mr.Note = "missing in some runs"
		mr.Verdict = MetricInconclusive
		return mr, w
	}
	sign := mr.Direction.Sign()
	xb, xc := transformAll(m, vb), transformAll(m, vc)
	n, k := float64(len(xb)), float64(len(xc))

	// Run-to-run variance: the current runs' pooled spread, shrunk toward
	// the A/A history's: σ̂² = (ν₀σ_h² + ν s²)/(ν₀+ν), t with ν₀+ν df.
	ss, df := stats.SumSq(xb)+stats.SumSq(xc), n+k-2
	var histSS, nu0 float64
	for _, set := range history {
		vh, ok := j.values(set, m)
		if !ok {
			continue
		}
		histSS += stats.SumSq(transformAll(m, vh))
		nu0 += float64(len(vh) - 1)
	}
	variance := (histSS + ss) / (nu0 + df)
	// The noise band comes from the history alone when there is one, else
	// from the baseline runs: it is the spread the baseline is known to
	// have, which the current runs cannot talk down.
	noiseVar := stats.Variance(xb)
	if nu0 > 0 {
		noiseVar = histSS / nu0
	}
	within, ci := j.requestBootstrap(m, base, cand)
	floor := within
	if !m.Absolute {
		floor = math.Max(floor, relVarFloor)
	}
	variance = math.Max(variance, floor)
	noiseVar = math.Max(noiseVar, floor)
	se := math.Sqrt(variance * (1/n + 1/k))
	dfAll := nu0 + df

	w.d = sign * (stats.Mean(xc) - stats.Mean(xb))
	mr.Baseline, mr.Candidate = stats.Median(vb), stats.Median(vc)
	if m.Absolute {
		mr.Delta = mr.Candidate - mr.Baseline
		w.medianD = sign * mr.Delta
		w.tau = th.Limit
	} else {
		mr.Delta = mr.Candidate/mr.Baseline - 1
		w.medianD = sign * (math.Log(mr.Candidate) - math.Log(mr.Baseline))
		w.tau = math.Log1p(th.Limit)
	}
	w.band = j.sigmas * math.Sqrt(noiseVar*(1/n+1/k))
	q := stats.TQuantile(1-j.alpha, dfAll)
	w.upper = w.d + q*se
	tstat := w.d / se
	w.pWorse = 1 - stats.TCDF(tstat, dfAll)
	w.pBetter = stats.TCDF(tstat, dfAll)
	w.ok = true

	raw := sign * w.d // change by value, in the test's space
	mr.CILow, mr.CIHigh = back(m, raw-q*se), back(m, raw+q*se)
	mr.NoiseBand = back(m, w.band)
	mr.PValue = stats.MannWhitney(vb, vc)
	mr.RequestCI = ci
	return mr, w
}

// back maps a change in the test's space to the reported one.
func back(m config.Metric, x float64) float64 {
	if m.Absolute {
		return x
	}
	return math.Expm1(x)
}

func (j *judge) values(runs []*result.Result, m config.Metric) ([]float64, bool) {
	out := make([]float64, 0, len(runs))
	for _, r := range runs {
		v, ok := runValue(r, m, j.cache)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || (!m.Absolute && v <= 0) {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

func transformAll(m config.Metric, vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = transform(m, v)
	}
	return out
}

// requestBootstrap resamples each run's requests (by order statistics for
// quantiles, by the CLT for means) and returns the mean within-run variance
// of a run's log statistic and a 95% interval of the relative change that
// this within-run error alone allows. Metrics without per-request samples
// (throughputs, error rate, GPU) return 0 and nil.
func (j *judge) requestBootstrap(m config.Metric, base, cand []*result.Result) (float64, *Interval) {
	if m.Series == "" {
		return 0, nil
	}
	type runSamples struct {
		sorted     []float64
		mean, se   float64
		sum, sumSq float64
	}
	collect := func(runs []*result.Result) []*runSamples {
		out := make([]*runSamples, len(runs))
		for i, r := range runs {
			s := j.cache.get(r, m.Series)
			if len(s) < 2 {
				return nil
			}
			rs := &runSamples{sorted: s}
			if m.Stat == "mean" {
				rs.mean = stats.Mean(s)
				rs.se = math.Sqrt(stats.Variance(s) / float64(len(s)))
			}
			out[i] = rs
		}
		return out
	}
	b, c := collect(base), collect(cand)
	if b == nil || c == nil {
		return 0, nil
	}
	draw := func(rs *runSamples) float64 {
		var v float64
		if m.Stat == "mean" {
			v = stats.MeanDraw(j.rng, rs.mean, rs.se)
		} else {
			v = stats.QuantileDraw(j.rng, rs.sorted, m.Percentile/100)
		}
		lv := math.Log(math.Max(v, 1e-12))
		rs.sum += lv
		rs.sumSq += lv * lv
		return lv
	}
	diffs := make([]float64, bootstrapReplicates)
	for i := range diffs {
		sb, sc := 0.0, 0.0
		for _, rs := range b {
			sb += draw(rs)
		}
		for _, rs := range c {
			sc += draw(rs)
		}
		diffs[i] = sc/float64(len(c)) - sb/float64(len(b))
	}
	sort.Float64s(diffs)
	within := 0.0
	all := append(b, c...)
	for _, rs := range all {
		mean := rs.sum / bootstrapReplicates
		within += rs.sumSq/bootstrapReplicates - mean*mean
	}
	within /= float64(len(all))
	return within, &Interval{Low: math.Expm1(stats.Quantile(diffs, 0.025)), High: math.Expm1(stats.Quantile(diffs, 0.975))}
}

// decide applies the three-zone rule to every measured metric, with Holm's
// correction across the gated ones.
func (j *judge) decide(ms []MetricResult) {
	var worse, better []float64
	var idx []int
	for i, w := range j.work {
		if w.ok && !w.secondary {
			worse = append(worse, w.pWorse)
			better = append(better, w.pBetter)
			idx = append(idx, i)
		}
	}
	holmWorse, holmBetter := stats.Holm(worse), stats.Holm(better)
	adjWorse := make([]float64, len(j.work))
	adjBetter := make([]float64, len(j.work))
	for i, w := range j.work {
		adjWorse[i], adjBetter[i] = w.pWorse, w.pBetter // secondary: not in the family
	}
	for n, i := range idx {
		adjWorse[i], adjBetter[i] = holmWorse[n], holmBetter[n]
	}
	for i := range ms {
		w := j.work[i]
		if !w.ok {
			continue
		}
		mr := &ms[i]
		mr.HolmP = adjWorse[i]
		sigWorse, sigBetter := adjWorse[i] <= j.alpha, adjBetter[i] <= j.alpha
		mr.Significant = sigWorse || sigBetter
		switch {
		// Regression: real (the interval excludes 0), beyond the noise
		// band, and worse than the threshold both by the test statistic and
		// by the medians shown.
		case sigWorse && w.d > w.band && w.d > w.tau && w.medianD > w.tau:
			mr.Verdict = MetricRegression
		case sigBetter && -w.d > w.band:
			mr.Verdict = MetricImprovement
		case w.upper < w.tau || w.d <= w.tau/2:
			if mr.Significant {
				mr.Verdict = MetricPass
			} else {
				mr.Verdict = MetricSame
			}
		default:
			mr.Verdict = MetricInconclusive
		}
	}
}

// verdict folds the gated metrics into the tier's verdict.
func verdict(rep *Report, tier config.Tier) (Verdict, int) {
	var regressed, unsure, unusable []string
	for _, m := range rep.Metrics {
		if m.Secondary {
			if m.Verdict == MetricRegression {
				rep.Notes = append(rep.Notes, fmt.Sprintf("secondary metric %s is worse by %+.1f%%: shown, does not block", m.Metric, 100*m.Delta))
			}
			continue
		}
		switch m.Verdict {
		case MetricRegression:
			regressed = append(regressed, m.Metric)
		case MetricInconclusive:
			if m.Note != "" {
				unusable = append(unusable, m.Metric)
			} else {
				unsure = append(unsure, m.Metric)
			}
		}
	}
	if len(rep.Mismatches) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("environment differs in %d field(s): the runs are not comparable; rerun the baseline or the candidate on a matching runner", len(rep.Mismatches)))
		return Inconclusive, 0
	}
	if len(regressed) > 0 {
		return Regression, 0
	}
	if len(unusable) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("gated metric(s) %v missing from some runs: more runs will not help; fix the benchmark or the tier's metrics", unusable))
		return Inconclusive, 0
	}
	if len(unsure) == 0 {
		return Pass, 0
	}
	target := 2 * max(tier.Repeats, MinRuns)
	if rep.CandidateRuns < target {
		rep.Notes = append(rep.Notes, fmt.Sprintf("inconclusive on %v: run %d more candidate run(s) and compare again with all %d", unsure, target-rep.CandidateRuns, target))
		return Inconclusive, target
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("still inconclusive on %v after %d candidate runs: the change is too close to the threshold for this noise", unsure, rep.CandidateRuns))
	return Inconclusive, 0
}
