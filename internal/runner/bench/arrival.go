package bench

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/stats"
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
			gaps[i] = stats.Gamma(rng, burstiness) * theta
		}
	}
	return gaps
}
