package changepoint

import (
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// Options tune Detect. The zero value gets the defaults below.
type Options struct {
	// Window is the length of the overlapping windows the series is split
	// into (step Window/2). Default 30: a month of nightlies. Otava's
	// default is 50; shorter windows find a step sooner after it happens.
	Window int
	// MaxPValue is the significance a change point must reach (two-sided
	// Student t-test of the segments either side). Default 0.001, Otava's.
	MaxPValue float64
	// MinMagnitude drops change points whose relative change of the mean
	// (the larger of forward and backward) is smaller. Default 0: keep every
	// significant shift; perfgate's nightly pass sets 2%.
	MinMagnitude float64
}

// Defaults for Options' zero fields.
const (
	DefaultWindow    = 30
	DefaultMaxPValue = 0.001
)

func (o Options) withDefaults() Options {
	if o.Window < 4 {
		o.Window = DefaultWindow
	}
	if o.MaxPValue <= 0 || o.MaxPValue >= 1 {
		o.MaxPValue = DefaultMaxPValue
	}
	if o.MinMagnitude < 0 {
		o.MinMagnitude = 0
	}
	return o
}

// ChangePoint is a shift at Index: z[Index] is the first value of the new
// regime, z[Index-1] the last of the old one. The statistics describe the
// segments between the neighbouring change points.
type ChangePoint struct {
	Index      int     `json:"index"`
	MeanBefore float64 `json:"mean_before"`
	MeanAfter  float64 `json:"mean_after"`
	StdBefore  float64 `json:"stddev_before"`
	StdAfter   float64 `json:"stddev_after"`
	NBefore    int     `json:"n_before"`
	NAfter     int     `json:"n_after"`
	PValue     float64 `json:"p_value"`
	T          float64 `json:"t"`
}

// Change is the forward relative change of the mean: +0.05 is 5% higher.
func (c ChangePoint) Change() float64 {
	if c.MeanBefore == 0 {
		return 0
	}
	return c.MeanAfter/c.MeanBefore - 1
}

// Magnitude is the larger of the forward and backward relative changes in
// absolute value, so a halving and a doubling weigh the same (Otava's rule).
func (c ChangePoint) Magnitude() float64 {
	f := math.Abs(c.Change())
	if c.MeanAfter != 0 {
		f = math.Max(f, math.Abs(c.MeanBefore/c.MeanAfter-1))
	}
	return f
}

// Detect returns the change points of z in index order.
//
// Split: each window z[start:start+Window] is divided recursively at the
// split of greatest energy divergence while the t-test of the two sides
// of the split (within the current segment) is significant at a relaxed
// threshold (10× MaxPValue, Otava's first pass); the union of these weak
// change points goes on. Merge: with each point's statistics taken over
// the whole series between its neighbours, the weakest point (largest
// p-value, or when all pass, the smallest magnitude) is removed and its
// neighbours re-tested, until all remaining are significant and large
// enough.
func Detect(z []float64, o Options) []ChangePoint {
	o = o.withDefaults()
	if len(z) < 3 {
		return nil
	}
	first := o.MaxPValue * 10
	if o.MaxPValue >= 0.05 {
		first = math.Min(o.MaxPValue*2, 0.5)
	}
	weak := split(z, o.Window, first)
	return merge(z, weak, o.MaxPValue, o.MinMagnitude)
}

// split collects weak change points window by window.
func split(z []float64, window int, maxP float64) []int {
	seen := map[int]bool{}
	var out []int
	step := window / 2
	for start := 0; start < len(z); {
		end := min(start+window, len(z))
		found := divide(z[start:end], maxP)
		last := 0
		for _, i := range found {
			if !seen[start+i] {
				seen[start+i] = true
				out = append(out, start+i)
			}
			last = max(last, start+i)
		}
		start = max(last, start+step)
	}
	sort.Ints(out)
	return out
}

// divide is E-divisive on one window: the best candidate across the
// current segments is accepted while its t-test passes.
func divide(w []float64, maxP float64) []int {
	d := newDivisive(w)
	var cps []int
	for {
		bounds := append(append([]int{0}, cps...), len(w))
		cand, candS, candE, bestQ, found := 0, 0, 0, 0.0, false
		for i := 0; i+1 < len(bounds); i++ {
			s, e := bounds[i], bounds[i+1]
			if tau, q, ok := d.best(s, e); ok && (!found || q > bestQ) {
				cand, candS, candE, bestQ, found = tau, s, e, q, true
			}
		}
		if !found {
			return cps
		}
		if cp := ttest(w[candS:cand], w[cand:candE]); cp.PValue > maxP {
			return cps
		}
		cps = append(cps, cand)
		sort.Ints(cps)
	}
}

// merge re-tests the weak points over the whole series and removes the
// weakest until every one left is significant and large enough.
func merge(z []float64, idx []int, maxP, minMag float64) []ChangePoint {
	for {
		cps := measure(z, idx)
		if len(cps) == 0 {
			return nil
		}
		weakest := 0
		for i, c := range cps {
			if c.PValue > cps[weakest].PValue {
				weakest = i
			}
		}
		if cps[weakest].PValue < maxP {
			for i, c := range cps {
				if c.Magnitude() < cps[weakest].Magnitude() {
					weakest = i
				}
			}
			if cps[weakest].Magnitude() >= minMag {
				return cps
			}
		}
		idx = append(idx[:weakest:weakest], idx[weakest+1:]...)
	}
}

// measure gives each point its statistics between its neighbours.
func measure(z []float64, idx []int) []ChangePoint {
	out := make([]ChangePoint, 0, len(idx))
	for i, at := range idx {
		lo, hi := 0, len(z)
		if i > 0 {
			lo = idx[i-1]
		}
		if i+1 < len(idx) {
			hi = idx[i+1]
		}
		cp := ttest(z[lo:at], z[at:hi])
		cp.Index = at
		out = append(out, cp)
	}
	return out
}

// ttest is the two-sided two-sample Student t-test with pooled variance.
// Below one degree of freedom it cannot tell anything: p = 1.
func ttest(a, b []float64) ChangePoint {
	cp := ChangePoint{NBefore: len(a), NAfter: len(b), PValue: 1}
	if len(a) == 0 || len(b) == 0 {
		return cp
	}
	cp.MeanBefore, cp.MeanAfter = stats.Mean(a), stats.Mean(b)
	if len(a) > 1 {
		cp.StdBefore = math.Sqrt(stats.Variance(a))
	}
	if len(b) > 1 {
		cp.StdAfter = math.Sqrt(stats.Variance(b))
	}
	df := float64(len(a) + len(b) - 2)
	if df < 1 {
		return cp
	}
	pooled := (stats.SumSq(a) + stats.SumSq(b)) / df
	se := math.Sqrt(pooled * (1/float64(len(a)) + 1/float64(len(b))))
	diff := cp.MeanAfter - cp.MeanBefore
	switch {
	case se == 0 && diff == 0:
		return cp
	case se == 0:
		cp.T, cp.PValue = math.Copysign(math.Inf(1), diff), 0
		return cp
	}
	cp.T = diff / se
	cp.PValue = 2 * stats.TCDF(-math.Abs(cp.T), df)
	return cp
}
