// Package gate decides whether a candidate's runs regressed. The unit of
// inference is the run — or, when runs share an engine start, the start:
// each run gives one value per metric (its median TPOT, its output tok/s),
// and the tests compare run values in log space. Pooling requests across
// runs would call every GPU clock shift a regression.
//
// Two designs:
//
//   - Compare judges the candidate's runs against a stored baseline's. The
//     two sets come from different sessions (engine starts, days, card
//     states), so the standard error carries the run-to-run variance
//     (the job's own, which the history may widen, never narrow) and the
//     session-to-session variance, estimated from the history's set means
//     around the tier's session_noise assumption.
//   - ComparePaired judges an interleaved job: base and head alternate on
//     one card (ABBA). With an engine start per run the test is a paired t
//     on the per-pair log ratios; when runs share starts, the start means
//     are the units (see unitEstimate). Session shifts and slow drift
//     cancel within a job.
//
// Both end in one three-zone rule per metric (regression, pass by the
// equivalence test, inconclusive), with Holm's correction across the gated
// metrics at the α this look of the pull request's bounded plan may spend
// (see Looks).
package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
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

// Designs a report can come from.
const (
	DesignStored      = "stored"      // candidate runs vs a stored baseline
	DesignInterleaved = "interleaved" // base/head pairs on one card
	DesignRecent      = "recent"      // runs vs the median of recent baselines (the ratchet)
)

// MinRuns is the fewest valid runs per side the stored comparison judges:
// the median of runs and any spread need three. MinPairs is the same for
// an interleaved job.
const (
	MinRuns  = 3
	MinPairs = 3
)

// MetricResult is one metric's comparison. Relative metrics report Delta,
// Estimate, Threshold, NoiseBand and the interval as fractions (+0.08 = 8%
// higher); absolute metrics (error_rate) as differences in the metric's
// own unit. Every float is finite.
type MetricResult struct {
	Metric    string           `json:"metric"` // config name, e.g. tpot_p90
	Key       string           `json:"key"`    // result key, e.g. p90_tpot_ms
	Unit      string           `json:"unit"`
	Direction config.Direction `json:"direction"`
	// Baseline is the baseline's centre in the metric's unit: the
	// geometric mean of its runs (for the ratchet, of the recent
	// baselines' means). Candidate is that centre moved by the estimate,
	// so Candidate/Baseline − 1 = Delta = Estimate and a row never reads
	// backwards. The medians of runs are context, shown apart.
	Baseline        float64 `json:"baseline"`
	Candidate       float64 `json:"candidate"`
	Delta           float64 `json:"delta"` // = Estimate: one change per row
	BaselineMedian  float64 `json:"baseline_median"`
	CandidateMedian float64 `json:"candidate_median"`
	// Estimate is the change the test estimates, by value: the ratio of
	// geometric means of runs (stored), or the geometric mean of the
	// per-pair ratios (interleaved), minus one.
	Estimate  float64 `json:"estimate"`
	Threshold float64 `json:"threshold"`
	// NoiseBand is NoiseSigmas standard deviations of the estimate under
	// the known noise: run-to-run from the history (or the baseline runs)
	// and, across sessions, session-to-session.
	NoiseBand float64 `json:"noise_band"`
	// P is the one-sided p-value of "worse" of the test that decides (a
	// t test with DF degrees of freedom), before Holm; HolmP is the same
	// after Holm's correction across the gated metrics: a regression needs
	// HolmP ≤ the look's α.
	P     float64 `json:"p"`
	HolmP float64 `json:"holm_p"`
	DF    float64 `json:"df"`
	// CILow, CIHigh is the interval of the rule that decided, by value,
	// both ends at Level: the equivalence test's 1 − β for a pass by it,
	// else the regression test's 1 − (Holm's level for this metric). So
	// the interval and the verdict beside it never disagree: a pass's
	// worse end is inside the threshold, a regression's better end
	// excludes no change, and "~" means the interval holds zero.
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	Level  float64 `json:"level"`
	// Rule is what decided the row (Rule* constants); Detectable is the
	// smallest change, worse-signed and by value, that the row's evidence
	// would call at its level with 90% power — what the runs could have
	// resolved.
	Rule       string  `json:"rule"`
	Detectable float64 `json:"detectable"`
	// RunsToResolve, for an open row, is about how many runs (pairs) in
	// all would make a change of the threshold's size detectable at this
	// noise: what more evidence could buy, to weigh against the budget.
	RunsToResolve int `json:"runs_to_resolve,omitempty"`
	// RunSD and SessionSD are the run-to-run and session-to-session
	// standard deviations the test used (log space: ≈ coefficients of
	// variation); PairSD is the per-pair ratio's.
	RunSD     float64 `json:"run_sd"`
	SessionSD float64 `json:"session_sd,omitempty"`
	PairSD    float64 `json:"pair_sd,omitempty"`
	// Bound is the pass (equivalence) test's bound on the worse side, by
	// value, at level Beta: the metric passes when it is inside the
	// threshold ("no regression larger than 5% (upper bound +2.1%)");
	// PassP is that test's p-value. Call is the change beyond which a
	// significant estimate is a regression (the threshold, or half of it).
	Bound float64 `json:"bound"`
	PassP float64 `json:"pass_p"`
	Beta  float64 `json:"beta,omitempty"`
	Call  float64 `json:"call"`
	// Estimator says how the estimate was made from the runs: the
	// experimental unit, runs dropped for a missing value, outlier runs
	// left out. Decided, when set, says what decided beyond the tests.
	Estimator     string `json:"estimator,omitempty"`
	Decided       string `json:"decided,omitempty"`
	Significant   bool   `json:"significant"`
	Verdict       string `json:"verdict"`
	Secondary     bool   `json:"secondary"`
	BaselineRuns  int    `json:"baseline_runs"`
	CandidateRuns int    `json:"candidate_runs"`
	Note          string `json:"note,omitempty"`
	// A long run's row (capacity, soak; see LongRun) carries what its own
	// rule read instead of the tests' statistics: Trend says how a soak
	// row's changes read per hour (Estimate is the slope, Baseline and
	// Candidate the fitted line at the judged window's ends);
	// BaselineRange and CandidateRange are where each side's capacity
	// knee lies.
	Trend          string `json:"trend,omitempty"`
	BaselineRange  *Range `json:"baseline_range,omitempty"`
	CandidateRange *Range `json:"candidate_range,omitempty"`
}

// Mismatch is an environment field on which the runs differ.
type Mismatch struct {
	Field     string `json:"field"`
	Baseline  string `json:"baseline"`
	Candidate string `json:"candidate"`
}

// Report is the gate's answer for one tier. It holds no NaN or infinity, so
// it always marshals.
type Report struct {
	Tier    string         `json:"tier"`
	Design  string         `json:"design"`
	Verdict Verdict        `json:"verdict"`
	Metrics []MetricResult `json:"metrics"`
	// Mismatches and ExcludedRuns say what was not compared and why.
	Mismatches   []Mismatch `json:"mismatches,omitempty"`
	ExcludedRuns []string   `json:"excluded_runs,omitempty"`
	// The evidence: runs on each side (for an interleaved job, both are
	// the number of complete pairs), the candidate's sessions (jobs), and
	// the history sessions behind the noise estimates.
	BaselineRuns      int `json:"baseline_runs"`
	CandidateRuns     int `json:"candidate_runs"`
	Pairs             int `json:"pairs,omitempty"`
	CandidateSessions int `json:"candidate_sessions,omitempty"`
	HistorySessions   int `json:"history_sessions"`
	// NeedMoreRuns, when the verdict is inconclusive for want of evidence,
	// is the total number of candidate runs (pairs, when interleaved) to
	// have before deciding again (3→6, 5→10, 8→16); 0 when more runs would
	// not help.
	NeedMoreRuns int      `json:"need_more_runs,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	// Confidence is the tier's family-wise confidence over all looks;
	// Alpha is the part of 1 − Confidence this look spent, and Looks the
	// commit's budget after it (store it; pass it to the next look).
	Confidence float64 `json:"confidence"`
	Alpha      float64 `json:"alpha"`
	Looks      Looks   `json:"looks"`
	// The tier's policy: how far a significant estimate must pass for a
	// regression (config.RegressionAt*), and what an inconclusive verdict
	// does to the check (config.Inconclusive*).
	RegressionAt       string `json:"regression_at"`
	InconclusivePolicy string `json:"inconclusive_policy"`
	// Rule is what decided the verdict (Rule* constants) and Headline
	// says it in one plain sentence; every surface prints Headline as its
	// first line and derives nothing of its own.
	Rule     string `json:"rule"`
	Headline string `json:"headline"`
}

// RunsToResolve is the most any open gated row needs (0: none open).
func (r *Report) RunsToResolve() int {
	n := 0
	for _, m := range r.Metrics {
		if !m.Secondary {
			n = max(n, m.RunsToResolve)
		}
	}
	return n
}

// NeedsAck reports whether the check must hold (action required) until a
// maintainer acknowledges it or more runs decide: an inconclusive verdict
// under a needs_ack tier.
func (r *Report) NeedsAck() bool {
	return r.Verdict == Inconclusive && r.InconclusivePolicy == config.InconclusiveNeedsAck
}

// Look is the number of this look in its commit's budget (1 = first).
func (r *Report) Look() int { return len(r.Looks.Spent) }

// Options tune a comparison.
type Options struct {
	// History is the noise prior: earlier sessions of unchanged code. In
	// production it comes from the baseline store (baseline.Options).
	History History
	// CandidateSessions names the session (the job) of each candidate run,
	// parallel to the candidate runs; nil means one session. Runs added
	// by a retest come from a new session, and the stored comparison's
	// standard error accounts for each.
	CandidateSessions []string
	// Looks is the pull request's error budget so far (zero: the first
	// look).
	Looks Looks
	// LastLook makes this look the plan's last: the caller cannot pay for
	// more evidence (the settle budget is spent), so it spends what is left
	// of α and β and decides what the tests leave open (see decide).
	LastLook bool
	// Reuse judges at the levels of the budget's last recorded look and
	// spends no new one: a re-judgement of evidence the plan has already
	// looked at (its looks are spent, and no verdict was stored).
	Reuse bool
	// Confidence overrides the tier's.
	Confidence float64
	// Recent is how many of the latest history sessions CompareRecent
	// takes the median of (default 3).
	Recent int
}

// DefaultConfidence is used when neither the tier nor the options set one:
// one-sided α = 0.005 family-wise, over every look at one commit. At a few
// hundred gated PRs a month that is about one false block a month from the
// test alone; the threshold and noise-band conditions push the real rate
// lower (see simulate-gate).
const DefaultConfidence = 0.995

// relVarFloor is the smallest run-to-run variance assumed (0.1% standard
// deviation in log space): identical synthetic runs must not make any
// difference infinitely significant.
const relVarFloor = 1e-3 * 1e-3

// Compare judges candidate runs against a stored baseline's runs for one
// tier, at the α the look budget in opt gives this look.
func Compare(baseline, candidate []*result.Result, tier config.Tier, opt Options) (*Report, error) {
	if len(baseline) == 0 {
		return nil, fmt.Errorf("compare: no baseline runs")
	}
	if len(candidate) == 0 {
		return nil, fmt.Errorf("compare: no candidate runs")
	}
	if opt.CandidateSessions != nil && len(opt.CandidateSessions) != len(candidate) {
		return nil, fmt.Errorf("compare: %d candidate sessions for %d candidate runs", len(opt.CandidateSessions), len(candidate))
	}
	j, rep, err := newJudge(tier, opt, DesignStored)
	if err != nil {
		return nil, err
	}
	base, _ := validRuns("baseline", baseline, nil, rep)
	cand, sessions := validRuns("candidate", candidate, opt.CandidateSessions, rep)
	rep.BaselineRuns, rep.CandidateRuns = len(base), len(cand)
	groups := groupSessions(cand, sessions)
	rep.CandidateSessions = len(groups)
	hist := j.historySessions(opt.History)
	if len(base) > 0 {
		var dropped int
		if hist, _, dropped = j.sameSetup(base[0], hist, nil); dropped > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d history set(s) left out of the noise prior: another card, driver, engine or load", dropped))
		}
	}
	rep.HistorySessions = len(hist)

	if len(base) > 0 && len(cand) > 0 {
		var notes []string
		rep.Mismatches, notes = checkEnvironment(base, cand, perfgateFields)
		rep.Notes = append(rep.Notes, notes...)
	}
	if c := contention(append(append([]*result.Result(nil), base...), cand...)); c != "" {
		rep.Notes = append(rep.Notes, c)
	}
	if d := delivery(append(append([]*result.Result(nil), base...), cand...)); d != "" {
		rep.Notes = append(rep.Notes, d)
	}
	if len(base) < MinRuns || len(cand) < MinRuns {
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few valid runs: %d baseline, %d candidate; the gate needs at least %d on each side", len(base), len(cand), MinRuns))
		if len(cand) < MinRuns {
			rep.NeedMoreRuns = max(MinRuns, tier.Repeats)
		}
		return j.finish(rep, Inconclusive)
	}
	measure := func(m config.Metric) (estimate, string) {
		return j.stored(m, base, groups, hist)
	}
	j.measureAll(rep, measure, func(m config.Metric) sideValues { return j.sides(m, base, cand) })
	return j.finish(rep, "")
}

// sides is what a two-sided design's row shows beside the estimate.
func (j *judge) sides(m config.Metric, base, cand []*result.Result) sideValues {
	xs, _ := j.presentLogValues(base, m)
	return sideValues{baseCentre: centre(m, stats.Mean(xs)), baseMedian: j.medianOf(base, m), candMed: j.medianOf(cand, m)}
}

// centre maps a mean in the test's space back to the metric's unit: the
// geometric mean for ratio metrics.
func centre(m config.Metric, x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0 // no runs with the metric: the row carries a note instead
	case m.Absolute:
		return x
	}
	return math.Exp(x)
}

// validRuns drops runs whose GPU telemetry marked them untrustworthy
// (throttling, a clock change, another process on the card) or whose
// benchmark client was the bottleneck, and records them in the report;
// sessions, when given, stay parallel to the runs.
func validRuns(side string, runs []*result.Result, sessions []string, rep *Report) ([]*result.Result, []string) {
	var out []*result.Result
	var outS []string
	unknown := 0
	for i, r := range runs {
		if r == nil {
			continue
		}
		if why, bad := invalid(r); bad {
			if rep != nil {
				rep.ExcludedRuns = append(rep.ExcludedRuns, fmt.Sprintf("%s run %d: %s", side, i+1, why))
			}
			continue
		}
		if r.Perfgate != nil && r.Perfgate.GPU != nil && !r.Perfgate.GPU.Available {
			unknown++
		}
		out = append(out, r)
		if sessions != nil {
			outS = append(outS, sessions[i])
		}
	}
	if unknown > 0 && rep != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d %s run(s) have no GPU telemetry: their validity is unknown", unknown, side))
	}
	return out, outS
}

// invalid says why GPU telemetry, or the benchmark client's check on
// itself, marked a run untrustworthy.
func invalid(r *result.Result) (string, bool) {
	if r.Perfgate != nil && r.Perfgate.Client != nil && r.Perfgate.Client.ClientBound {
		return "client-bound: " + r.Perfgate.Client.Reason, true
	}
	if r.Perfgate == nil || r.Perfgate.GPU == nil {
		return "", false
	}
	g := r.Perfgate.GPU
	if g.Valid || (!g.Available && len(g.Invalid) == 0) {
		return "", false
	}
	if len(g.Invalid) > 0 {
		return fmt.Sprint(g.Invalid), true
	}
	return "marked invalid", true
}

// groupSessions splits runs by session, in order of first appearance.
func groupSessions(runs []*result.Result, sessions []string) [][]*result.Result {
	if sessions == nil {
		return [][]*result.Result{runs}
	}
	idx := map[string]int{}
	var out [][]*result.Result
	for i, r := range runs {
		g, ok := idx[sessions[i]]
		if !ok {
			g = len(out)
			idx[sessions[i]] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], r)
	}
	return out
}

// stored estimates a stored comparison's change and its standard error:
//
//	SE² = σ_r²·(1/n + 1/k) + σ_s²·(1 + Σ w_g²)
//
// σ_r² pools the within-session spread of the baseline, of each candidate
// session and of the history; σ_s² is the session variance (see
// sessionVariance) over the baseline's and the history's set means, and
// w_g the share of the candidate runs from session g (retests add
// sessions). The t test's degrees of freedom are Satterthwaite's.
func (j *judge) stored(m config.Metric, base []*result.Result, groups [][]*result.Result, hist []Session) (estimate, string) {
	xb, missing := j.presentLogValues(base, m)
	var xc []float64
	var run pooled
	run.add(xb)
	k := 0.0
	var sizes []float64
	for _, g := range groups {
		x, miss := j.presentLogValues(g, m)
		missing += miss
		run.add(x)
		xc = append(xc, x...)
		if len(x) > 0 {
			sizes = append(sizes, float64(len(x)))
		}
		k += float64(len(x))
	}
	if len(xb) < MinRuns || len(xc) < MinRuns {
		return estimate{}, fmt.Sprintf("missing in %d run(s): fewer than %d left on a side", missing, MinRuns)
	}
	var histRun pooled
	means := []float64{stats.Mean(xb)}
	ns := []int{len(xb)}
	for _, s := range hist {
		x, ok := j.logValues(s.Runs, m)
		if !ok || len(x) < 2 {
			continue
		}
		histRun.add(x)
		means = append(means, stats.Mean(x))
		ns = append(ns, len(x))
	}
	// The job's own run-to-run variance always counts; the history may
	// widen it (pooled with it), never narrow it, and lends no degrees of
	// freedom.
	ownVar := run.variance()
	if histRun.df > 0 {
		ownVar = math.Max(ownVar, (run.ss+histRun.ss)/(run.df+histRun.df))
	}
	n := float64(len(xb))
	runVar := math.Max(ownVar, j.floor(m))
	sessVar, sessDF := sessionVariance(means, ns, runVar, j.sessionPrior(m), SessionPriorDF)
	w2 := 0.0
	for _, s := range sizes {
		w2 += (s / k) * (s / k)
	}
	a := runVar * (1/n + 1/k)
	b := sessVar * (1 + w2)
	e := estimate{
		d:         stats.Mean(xc) - stats.Mean(xb),
		medianD:   transform(m, j.medianOf(candAll(groups), m)) - transform(m, j.medianOf(base, m)),
		se:        math.Sqrt(a + b),
		df:        satterthwaite(a, run.df, b, sessDF),
		runSD:     math.Sqrt(runVar),
		sessionSD: math.Sqrt(sessVar),
		n:         len(xc),
		how:       fmt.Sprintf("ratio of geometric means of runs (%d vs %d)", len(xc), len(xb)),
	}
	if missing > 0 {
		e.how += fmt.Sprintf("; %d run(s) without a value left out", missing)
	}
	// The noise band is the spread the baseline is known to have, which
	// today's runs cannot talk down: the history's run-to-run variance when
	// there is one, else the baseline runs'.
	bandVar := stats.Variance(xb)
	if histRun.df > 0 {
		bandVar = histRun.variance()
	}
	bandVar = math.Max(bandVar, j.floor(m))
	e.band = j.sigmas * math.Sqrt(bandVar*(1/n+1/k)+b)
	return e, ""
}

func candAll(groups [][]*result.Result) []*result.Result {
	var out []*result.Result
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// historySessions keeps the history sessions with at least two valid runs.
func (j *judge) historySessions(h History) []Session {
	var out []Session
	for _, s := range h.Sessions {
		if v, _ := validRuns("", s.Runs, nil, nil); len(v) >= 2 {
			out = append(out, Session{Label: s.Label, Runs: v})
		}
	}
	return out
}

// sessionPrior is the tier's session variance assumption for a metric:
// relative metrics only (an absolute error rate has no CV).
func (j *judge) sessionPrior(m config.Metric) float64 {
	if m.Absolute {
		return 0
	}
	return j.sessionCV * j.sessionCV
}

func (j *judge) floor(m config.Metric) float64 {
	if m.Absolute {
		return 0
	}
	return relVarFloor
}

// presentLogValues is logValues over the runs that have the metric: a
// run without it is left out (and counted), not the metric.
func (j *judge) presentLogValues(runs []*result.Result, m config.Metric) ([]float64, int) {
	out := make([]float64, 0, len(runs))
	missing := 0
	for _, r := range runs {
		v, ok := j.value(r, m)
		if !ok {
			missing++
			continue
		}
		out = append(out, transform(m, v))
	}
	return out, missing
}

// logValues is the metric's value of each run in the test's space (log for
// ratios, identity for absolute metrics); false when a run lacks it.
func (j *judge) logValues(runs []*result.Result, m config.Metric) ([]float64, bool) {
	vs, ok := j.values(runs, m)
	if !ok {
		return nil, false
	}
	return transformAll(m, vs), true
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

// medianOf is the median over the runs that have the metric; 0 when none.
func (j *judge) medianOf(runs []*result.Result, m config.Metric) float64 {
	var vs []float64
	for _, r := range runs {
		if v, ok := j.value(r, m); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0
	}
	return stats.Median(vs)
}

func transformAll(m config.Metric, vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = transform(m, v)
	}
	return out
}

// back maps a change in the test's space to the reported one.
func back(m config.Metric, x float64) float64 {
	if m.Absolute {
		return x
	}
	return math.Expm1(x)
}

// tau is a threshold in the test's space, signed so that positive is
// worse: a higher-is-worse limit L fires at a ratio of 1+L, a
// lower-is-worse one at 1−L — so "−5%" fires at −5.00%, not −4.76%.
func tau(m config.Metric, th config.Threshold, dir config.Direction) float64 {
	if m.Absolute {
		return th.Limit
	}
	if dir == config.LowerIsWorse {
		return -math.Log1p(-th.Limit)
	}
	return math.Log1p(th.Limit)
}
