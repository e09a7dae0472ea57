package stats

// ClopperPearson is the exact (Clopper–Pearson) two-sided confidence
// interval, at level conf (e.g. 0.95), of a binomial proportion observed
// as k successes in n trials: the bounds are quantiles of the beta
// distributions Beta(k, n−k+1) and Beta(k+1, n−k), so the interval covers
// the true proportion with probability at least conf whatever it is.
func ClopperPearson(k, n int, conf float64) (lo, hi float64) {
	if n <= 0 || k < 0 || k > n {
		return 0, 1
	}
	a := (1 - conf) / 2
	if k > 0 {
		lo = betaQuantile(a, float64(k), float64(n-k+1))
	}
	hi = 1
	if k < n {
		hi = betaQuantile(1-a, float64(k+1), float64(n-k))
	}
	return lo, hi
}

// betaQuantile inverts RegIncBeta in x by bisection: I_x(a, b) is
// increasing in x, and 100 halvings pin x to double precision.
func betaQuantile(p, a, b float64) float64 {
	lo, hi := 0.0, 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if RegIncBeta(a, b, mid) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
