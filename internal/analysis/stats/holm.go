package stats

import (
	"math"
	"sort"
)

// Holm returns Holm–Bonferroni adjusted p-values: reject hypothesis i at
// family-wise level α when adjusted[i] ≤ α. A p-value that is NaN (a test
// that could not be computed) or outside [0, 1] counts as 1: it stays in
// the family, so the others are still corrected for it, and it is never
// rejected. The result holds no NaN.
func Holm(p []float64) []float64 {
	k := len(p)
	clean := make([]float64, k)
	for i, v := range p {
		switch {
		case math.IsNaN(v) || v > 1:
			clean[i] = 1
		case v < 0:
			clean[i] = 0
		default:
			clean[i] = v
		}
	}
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	// With NaN gone the order is total, so the sort sees every value.
	sort.SliceStable(idx, func(a, b int) bool { return clean[idx[a]] < clean[idx[b]] })
	adj := make([]float64, k)
	running := 0.0
	for rank, i := range idx {
		v := float64(k-rank) * clean[i]
		if v > 1 {
			v = 1
		}
		if v < running {
			v = running // adjusted p-values are monotone in rank
		}
		running = v
		adj[i] = v
	}
	return adj
}
