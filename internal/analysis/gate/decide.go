package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// judge holds what the metrics of one comparison share.
type judge struct {
	tier      config.Tier
	design    string
	alpha     float64 // family-wise, one-sided, this look
	beta      float64 // the pass test's one-sided level, this look
	sigmas    float64
	sessionCV float64
	half      bool // regression_at: half
	final     bool // the look budget's last look: what is open passes below the line
	cache     *seriesCache

	// Per metric, parallel to Report.Metrics, read by decide.
	work []metricWork
}

// estimate is one metric's change and its uncertainty, in the test's
// space, signed by value (higher = larger).
type estimate struct {
	d, se, df float64
	band      float64 // noise band, ≥ 0
	// medianD is the change of the medians shown, by value; NaN when the
	// design has no separate median condition.
	medianD                  float64
	runSD, sessionSD, pairSD float64
	// n is the number of runs (pairs) the estimate used; how says how it
	// got there (the estimator, runs dropped for a missing value, outliers
	// left out), for the check.
	n   int
	how string
}

// metricWork is the state decide needs beyond the MetricResult.
type metricWork struct {
	ok        bool
	secondary bool
	d         float64 // estimate, positive = worse
	medianD   float64 // medians' change, positive = worse (NaN: none)
	se, df    float64
	tau       float64 // threshold in the test's space
	band      float64
	pWorse    float64 // one-sided p of "d > 0"
	pBetter   float64 // one-sided p of "d < 0"
	sign      float64 // +1 higher is worse, −1 lower is worse
	m         config.Metric
}

func newJudge(tier config.Tier, opt Options, design string) (*judge, *Report, error) {
	if len(tier.Metrics) == 0 {
		return nil, nil, fmt.Errorf("compare: tier %q gates no metrics", tier.Name)
	}
	conf := opt.Confidence
	if conf == 0 {
		conf = tier.Confidence
	}
	if conf == 0 {
		conf = DefaultConfidence
	}
	if conf <= 0.5 || conf >= 1 || math.IsNaN(conf) {
		return nil, nil, fmt.Errorf("compare: confidence %g outside (0.5, 1)", conf)
	}
	if opt.Looks.Plan == "" && len(opt.Looks.Spent) == 0 {
		// A fresh budget takes the tier's spending plan; one already
		// spent keeps the plan it started with.
		opt.Looks.Plan = tier.Spending
	}
	looks, alpha, beta, err := opt.Looks.next(1-conf, opt.LastLook, opt.Reuse)
	if err != nil {
		return nil, nil, fmt.Errorf("compare: %w", err)
	}
	regAt, policy := tier.RegressionAt, tier.Inconclusive
	if regAt == "" {
		regAt = config.RegressionAtThreshold
	}
	if policy == "" {
		policy = config.InconclusiveNeutral
	}
	j := &judge{tier: tier, design: design, alpha: alpha, beta: beta, sigmas: tier.NoiseSigmas, sessionCV: float64(tier.SessionNoise),
		half: regAt == config.RegressionAtHalf, final: looks.Final(), cache: newSeriesCache()}
	rep := &Report{Tier: tier.Name, Design: design, Confidence: conf, Alpha: alpha, Looks: looks,
		RegressionAt: regAt, InconclusivePolicy: policy}
	return j, rep, nil
}

// measureAll estimates every gated and secondary metric and fills the
// report's rows; decide runs afterwards, in finish.
func (j *judge) measureAll(rep *Report, measure func(config.Metric) (estimate, string), sides func(config.Metric) sideValues) {
	for _, name := range j.tier.GatedMetrics() {
		mr, w := j.row(name, j.tier.Metrics[name], false, rep, measure, sides)
		rep.Metrics, j.work = append(rep.Metrics, mr), append(j.work, w)
	}
	for _, name := range j.tier.SecondaryMetrics() {
		mr, w := j.row(name, j.tier.Secondary[name], true, rep, measure, sides)
		if !w.ok {
			rep.Notes = append(rep.Notes, fmt.Sprintf("secondary metric %s not shown: %s", name, mr.Note))
			continue
		}
		rep.Metrics, j.work = append(rep.Metrics, mr), append(j.work, w)
	}
}

// sideValues is what a row shows of each side beside the estimate: the
// baseline's centre in the metric's unit (the geometric mean of its runs,
// or what the design compares with), from which the candidate's column is
// the estimate applied, and the medians of runs as context.
type sideValues struct {
	baseCentre          float64
	baseMedian, candMed float64
}

func (j *judge) row(name string, th config.Threshold, secondary bool, rep *Report, measure func(config.Metric) (estimate, string), sides func(config.Metric) sideValues) (MetricResult, metricWork) {
	m, known := config.LookupMetric(name)
	mr := MetricResult{Metric: name, Key: m.Key, Unit: m.Unit, Direction: th.Direction, Threshold: th.Limit,
		Secondary: secondary, BaselineRuns: rep.BaselineRuns, CandidateRuns: rep.CandidateRuns}
	if mr.Direction == "" {
		mr.Direction = m.Natural
	}
	w := metricWork{secondary: secondary, m: m, sign: mr.Direction.Sign()}
	// A metric that cannot be measured is no evidence either way.
	mr.P, mr.HolmP, mr.PassP = 1, 1, 1
	if !known {
		mr.Verdict, mr.Rule, mr.Note = MetricInconclusive, RuleUnmeasured, "unknown metric"
		return mr, w
	}
	e, note := measure(m)
	if note != "" {
		mr.Verdict, mr.Rule, mr.Note = MetricInconclusive, RuleUnmeasured, note
		return mr, w
	}
	sv := sides(m)
	mr.BaselineMedian, mr.CandidateMedian = sv.baseMedian, sv.candMed
	w.ok = true
	w.d, w.se, w.df, w.band = w.sign*e.d, e.se, e.df, e.band
	w.medianD = w.sign * e.medianD
	w.tau = tau(m, th, mr.Direction)
	w.pWorse, w.pBetter = oneSided(w.d, w.se, w.df)
	mr.Estimate = back(m, e.d)
	// One change per row: the value columns are the baseline's centre and
	// that centre moved by the estimate, so a row never reads backwards
	// and Δ is exactly their ratio.
	mr.Delta = mr.Estimate
	mr.Baseline = sv.baseCentre
	if m.Absolute {
		mr.Candidate = sv.baseCentre + mr.Estimate
	} else {
		mr.Candidate = sv.baseCentre * (1 + mr.Estimate)
	}
	mr.NoiseBand = back(m, e.band)
	mr.DF = e.df
	mr.RunSD, mr.SessionSD, mr.PairSD = e.runSD, e.sessionSD, e.pairSD
	mr.P = w.pWorse
	mr.Estimator = e.how
	if e.n > 0 {
		mr.CandidateRuns = e.n
		if j.design == DesignInterleaved {
			mr.BaselineRuns = e.n
		}
	}
	return mr, w
}

// oneSided is the pair of one-sided p-values of a t statistic d/se with df
// degrees of freedom. No difference and no spread is no evidence either
// way (p = 1, not 0/0); a difference with no spread is certain.
func oneSided(d, se, df float64) (worse, better float64) {
	switch {
	case math.IsNaN(d) || math.IsNaN(se) || math.IsNaN(df) || df <= 0:
		return 1, 1
	case se <= 0 && d == 0:
		return 1, 1
	case se <= 0 && d > 0:
		return 0, 1
	case se <= 0:
		return 1, 0
	}
	t := d / se
	worse = 1 - stats.TCDF(t, df)
	better = stats.TCDF(t, df)
	if math.IsNaN(worse) || math.IsNaN(better) {
		return 1, 1
	}
	return worse, better
}

// PassMissRate bounds how often a change exactly at the threshold passes,
// over all looks at one pull request together: each look's pass test (the
// equivalence test, TOST against the threshold) runs at its share of the
// plan (see Looks). It is the other error of the three-zone rule: a pass
// test as strict as the regression test would leave most unchanged PRs
// inconclusive at CV 5%.
const PassMissRate = 0.10

// decide applies the three-zone rule to every measured metric, with Holm's
// correction across the gated ones:
//
//   - regression: the Holm-adjusted one-sided p of "worse" is at most the
//     look's α, the estimate passes the threshold (half of it under
//     regression_at: half), the noise band, and — for a stored comparison —
//     the change of the medians shown passes the threshold too;
//   - improvement: significantly better, beyond the noise band;
//   - pass: the upper confidence bound on "worse", at the look's β, is
//     below the threshold (shown "~" when the change is not significant)
//     — the equivalence test; at the plan's last look also an estimate
//     below the regression line, so the looks converge;
//   - inconclusive otherwise.
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
	levels := holmLevels(worse, j.alpha)
	adjWorse := make([]float64, len(j.work))
	adjBetter := make([]float64, len(j.work))
	level := make([]float64, len(j.work))
	for i, w := range j.work {
		adjWorse[i], adjBetter[i], level[i] = w.pWorse, w.pBetter, j.alpha // secondary: not in the family
	}
	for n, i := range idx {
		adjWorse[i], adjBetter[i], level[i] = holmWorse[n], holmBetter[n], levels[n]
	}
	for i := range ms {
		w := j.work[i]
		if !w.ok {
			continue
		}
		mr := &ms[i]
		mr.HolmP = adjWorse[i]
		upper := w.d + tq(1-j.beta, w.df)*w.se // worse side: the pass test
		mr.Bound = back(w.m, w.sign*upper)
		mr.PassP = passP(w.d, w.tau, w.se, w.df)
		mr.Call = back(w.m, w.sign*call0(w.tau, j.half))
		mr.Beta = j.beta
		sigWorse, sigBetter := adjWorse[i] <= j.alpha, adjBetter[i] <= j.alpha
		mr.Significant = sigWorse || sigBetter
		call := w.tau
		if j.half {
			call = w.tau / 2
		}
		medianOK := math.IsNaN(w.medianD) || w.medianD > call
		// The level of the interval shown is the level of the rule that
		// decides the row.
		regLevel := 1 - level[i]
		show := regLevel
		switch {
		case sigWorse && w.d > call && w.d > w.band && medianOK:
			mr.Verdict, mr.Rule = MetricRegression, RuleRegressionTest
		case sigBetter && -w.d > w.band:
			mr.Verdict, mr.Rule = MetricImprovement, RuleImprovementTest
		case upper < w.tau:
			mr.Rule, show = RuleEquivalence, 1-j.beta
		case j.final && w.d <= call && j.precise(w):
			mr.Rule, show = RuleLastLook, 1-j.beta
			mr.Decided = "last look: estimate below the regression line"
		default:
			mr.Verdict, mr.Rule = MetricInconclusive, RuleOpen
		}
		half := tq(show, w.df) * w.se
		lo, hi := w.sign*(w.d-half), w.sign*(w.d+half) // by value
		if lo > hi {
			lo, hi = hi, lo
		}
		mr.CILow, mr.CIHigh, mr.Level = back(w.m, lo), back(w.m, hi), show
		if mr.Rule == RuleEquivalence || mr.Rule == RuleLastLook {
			// "~" exactly when the interval shown holds no change.
			mr.Verdict = MetricPass
			if w.d-half <= 0 && w.d+half >= 0 {
				mr.Verdict = MetricSame
			}
		}
		mr.Detectable = back(w.m, w.sign*(tq(regLevel, w.df)+tq(DetectPower, w.df))*w.se)
		if mr.Verdict == MetricInconclusive && w.tau > 0 && mr.CandidateRuns > 0 {
			// The standard error falls as 1/√n: the runs (pairs) in all
			// at which a change of the threshold's size is detectable.
			z := stats.NormQuantile(regLevel) + stats.NormQuantile(DetectPower)
			r := z * w.se / w.tau
			mr.RunsToResolve = int(math.Ceil(float64(mr.CandidateRuns) * r * r))
		}
	}
}

// DetectPower is the power at which a row's detectable change is stated.
const DetectPower = 0.9

// What decided a row, and a report.
const (
	RuleRegressionTest  = "regression_test"  // significant and past the regression line and the noise band
	RuleImprovementTest = "improvement_test" // significantly better, beyond the noise band
	RuleEquivalence     = "equivalence"      // the pass (TOST) bound is inside the threshold
	RuleLastLook        = "last_look"        // the plan's last look: the estimate is below the regression line
	RuleOpen            = "open"             // none of the above: more evidence, or a person, decides
	RuleUnmeasured      = "unmeasured"       // the metric is missing from runs
	RuleTooFewRuns      = "too_few_runs"
	RuleEnvironment     = "environment_mismatch"
)

// precise reports whether the evidence is precise enough for the last
// look to pass an estimate below the regression line: a change at the
// threshold would land below the line with probability at most
// PassMissRate. Under regression_at: threshold the line is the threshold
// and this never holds (only the equivalence test passes).
func (j *judge) precise(w metricWork) bool {
	return j.half && w.se*tq(1-PassMissRate, w.df) <= w.tau/2
}

// call0 is where a significant change becomes a regression.
func call0(tau float64, half bool) float64 {
	if half {
		return tau / 2
	}
	return tau
}

// passP is the equivalence test's one-sided p-value: of "the change is at
// least the threshold" against "it is smaller"; the metric passes when it
// is at most the look's β.
func passP(d, tau, se, df float64) float64 {
	_, p := oneSided(d-tau, se, df)
	return p
}

// holmLevels is the level Holm's step-down tests each p-value at: α/(k −
// rank) for the rank-th smallest (0-based); NaN p-values sort last.
func holmLevels(p []float64, alpha float64) []float64 {
	k := len(p)
	out := make([]float64, k)
	for i, pi := range p {
		rank := 0
		for j, pj := range p {
			if pj < pi || (pj == pi && j < i) || (math.IsNaN(pi) && !math.IsNaN(pj)) {
				rank++
			}
		}
		out[i] = alpha / float64(k-rank)
	}
	return out
}

// tq is Student's t quantile, finite for every df the gate produces.
func tq(p, df float64) float64 {
	if df <= 0 || math.IsNaN(df) {
		df = 1
	}
	return stats.TQuantile(p, math.Min(df, maxDF))
}

// finish decides (unless the verdict is already known), records the look
// in the budget and checks the report for non-finite numbers.
func (j *judge) finish(rep *Report, known Verdict) (*Report, error) {
	if known != "" {
		rep.Verdict, rep.Rule = known, RuleTooFewRuns
	} else {
		j.decide(rep.Metrics)
		rep.Verdict, rep.NeedMoreRuns = j.verdict(rep)
	}
	rep.Headline = headline(rep)
	rep.Looks.record(rep.BaselineRuns, rep.CandidateRuns, rep.Verdict)
	if err := rep.checkFinite(); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	return rep, nil
}

// verdict folds the gated metrics into the tier's verdict.
func (j *judge) verdict(rep *Report) (Verdict, int) {
	var regressed, unsure, unusable []string
	for _, m := range rep.Metrics {
		if m.Secondary {
			if m.Verdict == MetricRegression {
				rep.Notes = append(rep.Notes, fmt.Sprintf("secondary metric %s is worse by %s: shown, does not block", m.Metric, m.DeltaText()))
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
		rep.Rule = RuleEnvironment
		rep.Notes = append(rep.Notes, fmt.Sprintf("environment differs in %d field(s): the runs are not comparable; rerun the baseline or the candidate on a matching runner", len(rep.Mismatches)))
		return Inconclusive, 0
	}
	if len(regressed) > 0 {
		rep.Rule = RuleRegressionTest
		return Regression, 0
	}
	if len(unusable) > 0 {
		rep.Rule = RuleUnmeasured
		rep.Notes = append(rep.Notes, fmt.Sprintf("gated metric(s) %v missing from some runs: more runs will not help; fix the benchmark or the tier's metrics", unusable))
		return Inconclusive, 0
	}
	if len(unsure) == 0 {
		rep.Rule = RuleEquivalence
		for _, m := range rep.Metrics {
			if !m.Secondary && m.Rule == RuleLastLook {
				rep.Rule = RuleLastLook
			}
		}
		return Pass, 0
	}
	rep.Rule = RuleOpen
	unit, have := "candidate run(s)", rep.CandidateRuns
	first := max(j.tier.Repeats, MinRuns)
	if j.design == DesignInterleaved {
		unit, first = "pair(s)", max(j.tier.Pairs, MinPairs)
	}
	if j.design != DesignRecent && !rep.Looks.Final() {
		// Double the evidence: the standard error falls by √2 a look.
		target := max(2*have, 2*first)
		rep.Notes = append(rep.Notes, fmt.Sprintf("inconclusive on %v: %d more %s settle it (judged again with all %d, look %d of %d of this pull request's plan)",
			unsure, target-have, unit, target, len(rep.Looks.Spent)+1, rep.Looks.Max))
		return Inconclusive, target
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("still inconclusive on %v after %d %s at the last look of the plan: the change is too close to the threshold for this noise; a maintainer decides (/perf ack)", unsure, have, unit))
	return Inconclusive, 0
}

// checkFinite refuses a report with a NaN or infinity in it: encoding/json
// cannot write one, and a verdict must never be stored empty.
func (r *Report) checkFinite() error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	if bad(r.Confidence) || bad(r.Alpha) || bad(r.Looks.Alpha) {
		return fmt.Errorf("report of tier %s: non-finite confidence or α", r.Tier)
	}
	for _, l := range r.Looks.Spent {
		if bad(l.Alpha) {
			return fmt.Errorf("report of tier %s: non-finite α in the look budget", r.Tier)
		}
	}
	names := [...]string{"baseline", "candidate", "delta", "estimate", "threshold", "noise_band", "p", "holm_p", "df",
		"ci_low", "ci_high", "run_sd", "session_sd", "pair_sd", "bound", "pass_p", "call", "level", "detectable", "baseline_median", "candidate_median"}
	for _, m := range r.Metrics {
		for i, x := range [...]float64{m.Baseline, m.Candidate, m.Delta, m.Estimate, m.Threshold, m.NoiseBand, m.P, m.HolmP, m.DF,
			m.CILow, m.CIHigh, m.RunSD, m.SessionSD, m.PairSD, m.Bound, m.PassP, m.Call, m.Level, m.Detectable, m.BaselineMedian, m.CandidateMedian} {
			if bad(x) {
				return fmt.Errorf("report of tier %s: metric %s has a non-finite %s (%v)", r.Tier, m.Metric, names[i], x)
			}
		}
	}
	return nil
}
