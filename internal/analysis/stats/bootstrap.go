package stats

import (
	"math"
	"math/rand/v2"
)

// QuantileDraw draws one bootstrap replicate of the q-quantile of sorted
// without resampling: the k-th order statistic of n draws from the
// empirical distribution sits at the empirical quantile of a
// Beta(k, n+1-k) variate. That makes a bootstrap of a p99 over 100,000
// inter-token gaps O(1) per replicate after one sort.
func QuantileDraw(rng *rand.Rand, sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	k := q*float64(n-1) + 1 // 1-based fractional rank, as Quantile uses
	u := Beta(rng, k, float64(n)+1-k)
	return Quantile(sorted, u)
}

// MeanDraw draws one bootstrap replicate of the mean: by the central limit
// theorem, normal around the mean with the standard error.
func MeanDraw(rng *rand.Rand, mean, se float64) float64 {
	return mean + se*rng.NormFloat64()
}

// Beta draws from Beta(a, b).
func Beta(rng *rand.Rand, a, b float64) float64 {
	x := Gamma(rng, a)
	y := Gamma(rng, b)
	return x / (x + y)
}

// Gamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method.
func Gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		// Boost: Gamma(a) = Gamma(a+1) · U^(1/a), with U > 0 so a draw is
		// never exactly zero.
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return Gamma(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
