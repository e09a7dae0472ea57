package stats

import (
	"math"
	"testing"
)

func TestClopperPearson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k, n   int
		lo, hi float64
	}{
		// k = 0 and k = n have closed forms: 1 − (α/2)^(1/n) and its mirror.
		{0, 40, 0, 1 - math.Pow(0.025, 1.0/40)},
		{40, 40, math.Pow(0.025, 1.0/40), 1},
		// Solved from the binomial tails directly (P(X ≥ k | lo) = P(X ≤ k | hi) = 2.5%).
		{20, 40, 0.3380178, 0.6619822},
		{1, 40, 0.0006327, 0.1315859},
		{38, 40, 0.8308031, 0.9938864},
	}
	for _, tt := range tests {
		lo, hi := ClopperPearson(tt.k, tt.n, 0.95)
		if math.Abs(lo-tt.lo) > 5e-7 || math.Abs(hi-tt.hi) > 5e-7 {
			t.Errorf("ClopperPearson(%d, %d) = [%.7f, %.7f], want [%.7f, %.7f]", tt.k, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
}
