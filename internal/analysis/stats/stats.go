// Package stats holds the small statistics the gate needs: descriptive
// statistics, Student's t, the Mann–Whitney U test, Holm's correction and
// an order-statistic bootstrap for quantiles. No dependencies, no state
// beyond a cache of t quantiles.
package stats

import (
	"math"
	"sort"
)

// Mean of xs; NaN for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// SumSq is the sum of squared deviations from the mean.
func SumSq(xs []float64) float64 {
	m := Mean(xs)
	s := 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s
}

// Variance is the sample variance (n-1); NaN below two values.
func Variance(xs []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	return SumSq(xs) / float64(len(xs)-1)
}

// Median of xs, without changing xs.
func Median(xs []float64) float64 {
	return Quantile(sortedCopy(xs), 0.5)
}

// Quantile of sorted xs at q in [0,1], interpolating linearly between
// order statistics (numpy's default, which vLLM uses for its percentiles).
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := q * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

func sortedCopy(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}
