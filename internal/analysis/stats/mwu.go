package stats

import (
	"math"
	"sort"
)

// MannWhitney is the two-sided p-value of the Mann–Whitney U test of x
// against y, benchstat's test. Without ties and for small samples it is
// exact (the counts of rank sums); otherwise the normal approximation with
// tie and continuity corrections.
func MannWhitney(x, y []float64) float64 {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v float64
		g int
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v, 0})
	}
	for _, v := range y {
		all = append(all, obs{v, 1})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	// Mid-ranks for ties.
	r1, tieTerm, ties := 0.0, 0.0, false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2
		if t := float64(j - i); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		for k := i; k < j; k++ {
			if all[k].g == 0 {
				r1 += rank
			}
		}
		i = j
	}
	u := r1 - float64(n1*(n1+1))/2
	if !ties && n1*n2 <= 2500 {
		return exactMWU(u, n1, n2)
	}
	n := float64(n1 + n2)
	mu := float64(n1*n2) / 2
	sigma2 := float64(n1*n2) / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if sigma2 <= 0 {
		return 1
	}
	z := (math.Abs(u-mu) - 0.5) / math.Sqrt(sigma2)
	if z < 0 {
		z = 0
	}
	return math.Min(1, 2*(1-NormCDF(z)))
}

// exactMWU counts the arrangements whose U is at least as far from its
// mean as u: f(i, j, s) = ways for i x's and j y's to reach U = s.
func exactMWU(u float64, n1, n2 int) float64 {
	maxU := n1 * n2
	// dp[i][j] is a slice over s; built with the recurrence
	// f(i,j,s) = f(i-1,j,s-j) + f(i,j-1,s).
	prev := make([][]float64, n2+1)
	for j := range prev {
		prev[j] = make([]float64, maxU+1)
		prev[j][0] = 1 // i = 0
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		for j := 0; j <= n2; j++ {
			cur[j] = make([]float64, maxU+1)
			for s := 0; s <= i*j; s++ {
				v := 0.0
				if s-j >= 0 {
					v += prev[j][s-j]
				}
				if j > 0 {
					v += cur[j-1][s]
				}
				cur[j][s] = v
			}
		}
		prev = cur
	}
	counts := prev[n2]
	total, tail := 0.0, 0.0
	mu := float64(maxU) / 2
	dev := math.Abs(u - mu)
	for s, c := range counts {
		total += c
		if math.Abs(float64(s)-mu) >= dev-1e-9 {
			tail += c
		}
	}
	return math.Min(1, tail/total)
}
