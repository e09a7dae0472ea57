package bisect

import (
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// Reading is one job's interleaved runs: pair k is Values[k] of the
// measured commit and RefValues[k] of its reference, run back to back on
// one card (in ABBA order), so whatever the machine did in between moved
// both alike. A bisect judges commits only by such pairs.
type Reading struct {
	Seq       int       `json:"seq"`
	Index     int       `json:"index"` // the measured commit
	Ref       int       `json:"ref"`   // its reference: the good end, or the culprit's parent
	Values    []float64 `json:"values"`
	RefValues []float64 `json:"ref_values"`
	// Disturbed: its pairs disagree among themselves far more than every
	// other job's do (a load burst over several runs of one side): its
	// change is set aside and the commit measured again. Its spread still
	// joins the noise, so a machine that got noisier for good raises the
	// bar rather than having every later job set aside.
	Disturbed bool `json:"disturbed,omitempty"`
	skipNoise bool // while its own disturbance is judged
}

// diffs is the reading's pairs as log(commit) − log(reference).
func (r Reading) diffs() []float64 {
	out := make([]float64, len(r.Values))
	for k := range r.Values {
		out[k] = math.Log(r.Values[k]) - math.Log(r.RefValues[k])
	}
	return out
}

// estimate is a paired change, log(commit) − log(reference), with its
// standard error.
type estimate struct {
	D, SE float64
	DF    float64
	Pairs int
}

// clip is how far (in pooled standard deviations) a pair may lie from its
// reading's median before it is pulled in: a load burst that hits one run
// of a pair makes one wild difference, which must not carry the mean.
const clip = 2.5

// pairNoise pools the spread of pair differences over every reading (each
// about its own median, so a shift between jobs is no noise), robustly: a
// first pass takes the median absolute deviation, a second the variance of
// the differences clipped at clip of it. The rule's prior (one run's σ,
// so a pair's is √2 of it) joins with its weight.
func (s *State) pairNoise() Noise {
	var groups [][]float64
	var resid []float64
	for _, r := range s.Readings {
		d := r.diffs()
		if len(d) < 2 || r.skipNoise {
			continue
		}
		groups = append(groups, d)
		m := stats.Median(d)
		for _, x := range d {
			resid = append(resid, math.Abs(x-m))
		}
	}
	ss, df := 0.0, 0.0
	rule := s.Config.Rule
	if rule.PriorSigma > 0 && rule.PriorDF > 0 {
		ss, df = rule.PriorDF*2*rule.PriorSigma*rule.PriorSigma, rule.PriorDF
	}
	if len(resid) > 0 {
		sort.Float64s(resid)
		mad := 1.4826 * stats.Quantile(resid, 0.5)
		for _, d := range groups {
			c := clipped(d, mad)
			ss += stats.SumSq(c)
			df += float64(len(c) - 1)
		}
	}
	if df == 0 || ss == 0 {
		return Noise{Sigma: math.NaN()}
	}
	return Noise{Sigma: math.Sqrt(ss / df), DF: df}
}

// clipped pulls the differences further than clip·sigma from their median
// in to that distance; sigma 0 or NaN leaves them.
func clipped(d []float64, sigma float64) []float64 {
	out := append([]float64(nil), d...)
	if !(sigma > 0) {
		return out
	}
	m := stats.Median(d)
	for k, x := range out {
		out[k] = math.Max(m-clip*sigma, math.Min(m+clip*sigma, x))
	}
	return out
}

// paired estimates commit i's change against ref from every reading that
// measured the two together, each reading's differences clipped about its
// median; since > 0 keeps readings of that sequence number or later.
func (s *State) paired(i, ref, since int, n Noise) estimate {
	var all []float64
	for _, r := range s.Readings {
		if r.Index == i && r.Ref == ref && r.Seq >= since && !r.Disturbed {
			all = append(all, clipped(r.diffs(), n.Sigma)...)
		}
	}
	e := estimate{D: math.NaN(), SE: math.Inf(1), DF: n.DF, Pairs: len(all)}
	if len(all) == 0 {
		return e
	}
	e.D = stats.Mean(all)
	if n.Sigma > 0 {
		e.SE = n.Sigma / math.Sqrt(float64(len(all)))
	}
	return e
}

// disturbedP is the significance at which a job's pair spread is taken to
// exceed the noise pooled over the other jobs (an F test): strict, so an
// undisturbed bisect seldom pays for it.
const disturbedP = 0.001

// disturbed reports whether the last reading's pairs spread significantly
// more than the other readings' pooled noise, and by what factor. A
// commit's second disturbed reading in a row is taken as it is: the
// machine is that noisy now.
func (s *State) disturbed() (float64, bool) {
	k := len(s.Readings) - 1
	last := s.Readings[k]
	for j := k - 1; j >= 0; j-- {
		if r := s.Readings[j]; r.Index == last.Index && r.Ref == last.Ref {
			if r.Disturbed {
				return 0, false
			}
			break
		}
	}
	s.Readings[k].skipNoise = true // out of the pool while it is judged
	n := s.pairNoise()
	s.Readings[k].skipNoise = false
	d := last.diffs()
	if len(d) < 3 || !(n.Sigma > 0) || n.DF < 6 {
		return 0, false
	}
	d1 := float64(len(d) - 1)
	f := stats.Variance(d) / (n.Sigma * n.Sigma)
	// P(F(d1, df) > f) = I_{df/(df+d1·f)}(df/2, d1/2).
	p := stats.RegIncBeta(n.DF/2, d1/2, n.DF/(n.DF+d1*f))
	return math.Sqrt(f), p < disturbedP
}

// test applies the rule to a paired change d with standard error se:
// different when significant at Alpha (two-sided) and at least MinChange,
// same when the one-sided SameAlpha bound stays within margin; dir as in
// Compare.
func (r Rule) test(d, se, df, margin, dir float64) Comparison {
	r = r.withDefaults()
	c := Comparison{Outcome: Unknown, D: d, HalfWidth: math.Inf(1)}
	if math.IsNaN(d) || math.IsNaN(se) || math.IsInf(se, 1) || df < 1 {
		return c
	}
	x := math.Abs(d)
	if dir != 0 {
		x = d * math.Copysign(1, dir)
	}
	c.HalfWidth = stats.TQuantile(1-r.Alpha/2, df) * se
	hs := stats.TQuantile(1-r.SameAlpha, df) * se
	switch {
	case x > c.HalfWidth && x >= math.Log1p(r.MinChange):
		c.Outcome = Different
	case x+hs < margin && (dir == 0 || x-hs > -margin):
		// With a direction, "same" is within margin both ways: a commit
		// that moved the other way by as much is not at the good level.
		c.Outcome = Same
	}
	return c
}

// ComparePairs compares a commit with a reference measured interleaved with
// it on one card, commit[k] and ref[k] being pair k: the test git bisect
// run's single step makes. The noise is the pairs' own spread (with the
// rule's prior), robust to a wild pair; dir is the direction of the change
// chased (0: either). Different when the commit moved that way
// significantly and by at least MinChange; same when it is, with
// confidence, within MinChange of the reference both ways.
func (r Rule) ComparePairs(commit, ref []float64, dir float64) Comparison {
	n := min(len(commit), len(ref))
	rd := Reading{Values: commit[:n], RefValues: ref[:n]}
	s := &State{Config: Config{Rule: r.withDefaults()}, Readings: []Reading{rd}}
	noise := s.pairNoise()
	e := s.paired(0, 0, 0, noise)
	return s.Config.Rule.test(e.D, e.SE, noise.DF, math.Log1p(s.Config.Rule.MinChange), dir)
}
