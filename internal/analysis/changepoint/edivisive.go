// Package changepoint finds the points where a performance series shifts:
// E-divisive means (Matteson & James, 2014) with the practical changes of
// Hunter (Fleming et al., 2023) that Apache Otava and MongoDB run in
// production — a Student t-test instead of the permutation test, fixed
// overlapping windows, and "weak" change points found at a relaxed p-value
// and then merged away bottom-up until every survivor is significant at
// the real threshold and at least the minimum magnitude.
//
// The package is pure: a []float64 in, change points out. Which series to
// analyse, and what a change point means for a repository, is the caller's.
package changepoint

// divisive holds one (sub)series and the prefix sums of its pairwise
// distance matrix D[i][j] = |z_i − z_j|, so the divergence of any split is
// O(1) and the best split of an interval of n points is O(n²).
type divisive struct {
	n int
	// p[(a)*(n+1)+b] = Σ_{i<a, j<b} D[i][j]
	p []float64
}

func newDivisive(z []float64) *divisive {
	n := len(z)
	w := n + 1
	p := make([]float64, w*w)
	for i := 0; i < n; i++ {
		row := 0.0
		for j := 0; j < n; j++ {
			d := z[i] - z[j]
			if d < 0 {
				d = -d
			}
			row += d
			p[(i+1)*w+j+1] = p[i*w+j+1] + row
		}
	}
	return &divisive{n: n, p: p}
}

// rect is Σ D[i][j] over i in [i0, i1), j in [j0, j1).
func (d *divisive) rect(i0, i1, j0, j1 int) float64 {
	w := d.n + 1
	return d.p[i1*w+j1] - d.p[i0*w+j1] - d.p[i1*w+j0] + d.p[i0*w+j0]
}

// qhat is the scaled energy divergence of X = z[s:tau] and Y = z[tau:kappa]:
//
//	Q = 2/(n+m)·ΣΣ|X−Y| − 2m/((n+m)(n−1))·Σ_{i<j}|X_i−X_j| − 2n/((n+m)(m−1))·Σ_{i<j}|Y_i−Y_j|
//
// with n = |X|, m = |Y|; a within-sum over one point is zero.
func (d *divisive) qhat(s, tau, kappa int) float64 {
	n, m := float64(tau-s), float64(kappa-tau)
	q := 2 / (n + m) * d.rect(s, tau, tau, kappa)
	if n > 1 {
		q -= 2 * m / ((n + m) * (n - 1)) * d.rect(s, tau, s, tau) / 2
	}
	if m > 1 {
		q -= 2 * n / ((n + m) * (m - 1)) * d.rect(tau, kappa, tau, kappa) / 2
	}
	return q
}

// best finds, within [s, e), the split tau (s < tau < kappa ≤ e) of maximum
// divergence over every end kappa: truncating Y at kappa keeps a later
// shift from muddying the first one. ok is false when [s, e) has fewer than
// two points.
func (d *divisive) best(s, e int) (tau int, q float64, ok bool) {
	for t := s + 1; t < e; t++ {
		for k := t + 1; k <= e; k++ {
			if v := d.qhat(s, t, k); !ok || v > q {
				tau, q, ok = t, v, true
			}
		}
	}
	return tau, q, ok
}
