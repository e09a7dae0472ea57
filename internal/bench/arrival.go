package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivalOffsets returns, for each of n requests, when it should be sent,
// measured from the start of the measured phase. It follows vLLM's
// get_request: inter-arrival gaps are gamma distributed with shape
// burstiness and scale 1/(rate·burstiness), so the mean gap is 1/rate and
// the coefficient of variation is 1/sqrt(burstiness) (burstiness 1 is a
// Poisson process). The cumulative schedule is then rescaled so the last
// request lands at n/rate, as vLLM does to keep throughput comparable across
// seeds. An infinite rate sends everything at once; an infinite burstiness
// gives evenly spaced arrivals.
func arrivalOffsets(n int, rate, burstiness float64, rng *rand.Rand) []time.Duration {
	out := make([]time.Duration, n)
	if n == 0 || math.IsInf(rate, 1) {
		return out
	}
	gaps := interArrivals(n, rate, burstiness, rng)
	cum := make([]float64, n)
	sum := 0.0
	for i, g := range gaps {
		sum += g
		cum[i] = sum
	}
	if sum > 0 {
		norm := float64(n) / rate / sum
		for i := range cum {
			cum[i] *= norm
		}
	}
	for i, s := range cum {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

// interArrivals draws n raw gaps in seconds before any rescaling.
func interArrivals(n int, rate, burstiness float64, rng *rand.Rand) []float64 {
	gaps := make([]float64, n)
	for i := range gaps {
		switch {
		case math.IsInf(burstiness, 1):
			gaps[i] = 1 / rate
		default:
			theta := 1 / (rate * burstiness)
			gaps[i] = gammaSample(rng, burstiness) * theta
		}
	}
	return gaps
}

// gammaSample draws from Gamma(shape, 1) with Marsaglia and Tsang's method;
// shapes below one use the boost Gamma(a) = Gamma(a+1)·U^(1/a).
func gammaSample(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaSample(rng, shape+1) * math.Pow(u, 1/shape)
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
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
