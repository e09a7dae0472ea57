package stats

import "sort"

// Holm returns Holm–Bonferroni adjusted p-values: reject hypothesis i at
// family-wise level α when adjusted[i] ≤ α.
func Holm(p []float64) []float64 {
	k := len(p)
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	adj := make([]float64, k)
	running := 0.0
	for rank, i := range idx {
		v := float64(k-rank) * p[i]
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
