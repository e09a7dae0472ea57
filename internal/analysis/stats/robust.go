package stats

import "math"

// NormQuantile is the p-quantile of the standard normal.
func NormQuantile(p float64) float64 {
	switch {
	case math.IsNaN(p):
		return math.NaN()
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	}
	// math.Erfinv loses the far tail; Erfcinv keeps it.
	if p < 0.5 {
		return -math.Sqrt2 * math.Erfcinv(2*p)
	}
	return math.Sqrt2 * math.Erfcinv(2*(1-p))
}

// MADScale is the median absolute deviation from the median, scaled by
// 1.4826 so that it estimates the standard deviation of a normal sample.
// Half of the sample can be arbitrarily bad before it breaks (breakdown
// point 50%). NaN for an empty sample.
func MADScale(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return 1.4826 * Median(dev)
}

// Outliers returns the indices of the values farther than k robust
// standard deviations (MADScale, floored at minScale) from the median,
// the farthest first, at most maxOut of them. It is hard rejection with a
// stated breakdown: maxOut bad values out of len(xs) are removed; more
// than that, and the rest stay in (and widen the variance the test uses).
func Outliers(xs []float64, k, minScale float64, maxOut int) []int {
	if len(xs) < 3 || maxOut <= 0 {
		return nil
	}
	m := Median(xs)
	s := math.Max(MADScale(xs), minScale)
	if !(s > 0) {
		return nil
	}
	var idx []int
	for i, x := range xs {
		if math.Abs(x-m) > k*s {
			idx = append(idx, i)
		}
	}
	// farthest first
	for a := 1; a < len(idx); a++ {
		for b := a; b > 0 && math.Abs(xs[idx[b]]-m) > math.Abs(xs[idx[b-1]]-m); b-- {
			idx[b], idx[b-1] = idx[b-1], idx[b]
		}
	}
	if len(idx) > maxOut {
		idx = idx[:maxOut]
	}
	return idx
}
