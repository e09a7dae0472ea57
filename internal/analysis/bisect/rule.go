package bisect

import (
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// Outcome is one comparison of two commits' runs, Pinpoint's three answers.
type Outcome string

// Outcomes.
const (
	// Same: with confidence, the two commits are nearer each other than
	// half the change being chased.
	Same Outcome = "same"
	// Different: the two commits differ significantly, by at least the
	// smallest change worth a bisect.
	Different Outcome = "different"
	// Unknown: not enough runs to say either; measure more.
	Unknown Outcome = "unknown"
)

// Rule is the three-outcome comparison. Work is in log space: a run's value
// v becomes log v, so changes are relative and symmetric.
//
// With d the difference of two commits' mean log values and se its standard
// error (the run-to-run spread pooled over every commit measured in the
// bisect, because three runs cannot estimate their own spread):
//
//   - different when |d| > t(1−Alpha/2)·se and |d| ≥ log(1+MinChange):
//     significant at Pinpoint's level and large enough to matter;
//   - same when |d| + t(1−SameAlpha)·se < margin: a one-sided equivalence
//     test (TOST) — the data rule out a shift as large as the margin. Between
//     a commit and an end the margin is half the ends' difference (the
//     commit is, with confidence, at that end's level); between the ends it
//     is log(1+MinChange);
//   - unknown otherwise: add runs.
//
// Different takes precedence: a commit significantly away from the good
// end has a change before it even when it is nearer good than bad, which is
// how a bisect over two steps finds the first.
type Rule struct {
	// Alpha is the two-sided level of "different" (Pinpoint: 0.01).
	Alpha float64 `json:"alpha"`
	// SameAlpha is the one-sided level of "same".
	SameAlpha float64 `json:"same_alpha"`
	// MinChange is the smallest relative change worth finding (0.03 = 3%).
	MinChange float64 `json:"min_change"`
	// PriorSigma is the run-to-run standard deviation of log values known
	// from history (A/A runs of the benchmark on the same runner class);
	// PriorDF its weight in degrees of freedom. Zero: none.
	PriorSigma float64 `json:"prior_sigma,omitempty"`
	PriorDF    float64 `json:"prior_df,omitempty"`
}

// DefaultRule is Pinpoint's level for "different", 5% for the equivalence
// test and the change-point pass's smallest magnitude, 3%.
func DefaultRule() Rule {
	return Rule{Alpha: 0.01, SameAlpha: 0.05, MinChange: 0.03}
}

func (r Rule) withDefaults() Rule {
	d := DefaultRule()
	if r.Alpha <= 0 || r.Alpha >= 1 {
		r.Alpha = d.Alpha
	}
	if r.SameAlpha <= 0 || r.SameAlpha >= 1 {
		r.SameAlpha = d.SameAlpha
	}
	if r.MinChange <= 0 {
		r.MinChange = d.MinChange
	}
	return r
}

// Noise is the pooled run-to-run spread of log values.
type Noise struct {
	Sigma float64 // standard deviation of one run's log value
	DF    float64 // its degrees of freedom
}

// Noise pools the within-commit variance of every sample (log values) with
// the rule's prior: σ̂² = (ν₀σ₀² + Σ(nᵢ−1)sᵢ²) / (ν₀ + Σ(nᵢ−1)). Each
// commit is measured on the same card with the same workload, so their
// spreads estimate one run-to-run variance.
func (r Rule) Noise(samples ...[]float64) Noise {
	ss, df := 0.0, 0.0
	if r.PriorSigma > 0 && r.PriorDF > 0 {
		ss, df = r.PriorDF*r.PriorSigma*r.PriorSigma, r.PriorDF
	}
	for _, s := range samples {
		if len(s) >= 2 {
			ss += stats.SumSq(s)
			df += float64(len(s) - 1)
		}
	}
	if df == 0 {
		return Noise{Sigma: math.NaN()}
	}
	return Noise{Sigma: math.Sqrt(ss / df), DF: df}
}

// Comparison is one application of the rule.
type Comparison struct {
	Outcome Outcome `json:"outcome"`
	// D is mean log(b) − mean log(a); exp(D)−1 is the relative change.
	D float64 `json:"d"`
	// HalfWidth is t(1−Alpha/2)·se, the significance half-width.
	HalfWidth float64 `json:"half_width"`
}

// Change is the relative change from a to b (0.1 = 10% higher).
func (c Comparison) Change() float64 { return math.Expm1(c.D) }

func (c Comparison) finite() Comparison {
	if math.IsNaN(c.D) || math.IsInf(c.D, 0) {
		c.D = 0
	}
	if math.IsNaN(c.HalfWidth) || math.IsInf(c.HalfWidth, 0) {
		c.HalfWidth = 0
	}
	return c
}

// Compare applies the rule to two samples of log values with the pooled
// noise n; margin is the equivalence margin in log units. dir is the
// direction of the change being chased (+1 up, −1 down): then only a move
// that way counts as different, and "same" means less than margin that way,
// so a commit that moved the other way is not mistaken for the change. dir 0
// tests both ways.
func (r Rule) Compare(a, b []float64, n Noise, margin, dir float64) Comparison {
	r = r.withDefaults()
	if len(a) == 0 || len(b) == 0 {
		return Comparison{Outcome: Unknown, D: math.NaN(), HalfWidth: math.Inf(1)}
	}
	d := stats.Mean(b) - stats.Mean(a)
	if math.IsNaN(n.Sigma) || n.DF < 1 {
		return Comparison{Outcome: Unknown, D: d, HalfWidth: math.Inf(1)}
	}
	x := math.Abs(d)
	if dir != 0 {
		x = d * math.Copysign(1, dir)
	}
	se := n.Sigma * math.Sqrt(1/float64(len(a))+1/float64(len(b)))
	hd := stats.TQuantile(1-r.Alpha/2, n.DF) * se
	hs := stats.TQuantile(1-r.SameAlpha, n.DF) * se
	c := Comparison{Outcome: Unknown, D: d, HalfWidth: hd}
	switch {
	case x > hd && x >= math.Log1p(r.MinChange):
		c.Outcome = Different
	case x+hs < margin:
		c.Outcome = Same
	}
	return c
}

// Verdict is what a commit turned out to be.
type Verdict string

// Verdicts.
const (
	Good      Verdict = "good"    // at the good end's level: the change comes after it
	Bad       Verdict = "bad"     // changed from the good end: the (first) change is at or before it
	Undecided Verdict = "unknown" // the runs do not say yet
)

// Judgement is one commit compared with both ends.
type Judgement struct {
	VsGood  Comparison `json:"vs_good"`
	VsBad   Comparison `json:"vs_bad"` // Outcome "" when there is no bad end
	Verdict Verdict    `json:"verdict"`
	// Between: the commit differs from both ends, so the ends' difference
	// is more than one change.
	Between bool `json:"between,omitempty"`
}

// Judge compares a commit's runs with both ends' (raw values, logged here):
// bad when it is different from good, good when it is the same as good,
// unknown otherwise. bad may be empty: then "same" means within MinChange of
// good. pool adds other commits' runs to the noise estimate.
func (r Rule) Judge(good, commit, bad []float64, pool ...[]float64) Judgement {
	g, c, b := logs(good), logs(commit), logs(bad)
	samples := [][]float64{g, c, b}
	for _, p := range pool {
		samples = append(samples, logs(p))
	}
	return r.judge(r.Noise(samples...), g, c, b, 0)
}

// JudgeToward compares a commit with the good end alone, for a change in
// direction dir: +1 when the bad commits are higher (a latency regression),
// −1 when lower (a throughput regression), 0 for either way. A commit that
// moved the other way is good: it does not have the change being chased.
func (r Rule) JudgeToward(good, commit []float64, dir float64, pool ...[]float64) Judgement {
	g, c := logs(good), logs(commit)
	samples := [][]float64{g, c}
	for _, p := range pool {
		samples = append(samples, logs(p))
	}
	return r.judge(r.Noise(samples...), g, c, nil, dir)
}

// judge is Judge on log values with the noise given. With a bad end the
// comparisons are directional: "different from good" is a move toward bad,
// "same as good" is less than halfway there. Without one, dir gives the
// direction (0: either) and "same" means less than MinChange that way.
func (r Rule) judge(n Noise, g, c, b []float64, dir float64) Judgement {
	r = r.withDefaults()
	margin := math.Log1p(r.MinChange)
	if len(b) > 0 {
		delta := mean(b) - mean(g)
		margin, dir = math.Abs(delta)/2, math.Copysign(1, delta)
	}
	j := Judgement{VsGood: r.Compare(g, c, n, margin, dir), Verdict: Undecided}
	if len(b) > 0 {
		j.VsBad = r.Compare(c, b, n, margin, dir)
	}
	switch j.VsGood.Outcome {
	case Different:
		j.Verdict = Bad
		j.Between = j.VsBad.Outcome == Different
	case Same:
		j.Verdict = Good
	}
	return j
}

// CompareEnds says whether the good and bad ends differ: different (bisect),
// same (within MinChange: nothing to find) or unknown (add runs).
func (r Rule) CompareEnds(good, bad []float64, pool ...[]float64) Comparison {
	r = r.withDefaults()
	g, b := logs(good), logs(bad)
	samples := [][]float64{g, b}
	for _, p := range pool {
		samples = append(samples, logs(p))
	}
	return r.Compare(g, b, r.Noise(samples...), math.Log1p(r.MinChange), 0)
}

func logs(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.Log(v)
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return stats.Mean(xs)
}
