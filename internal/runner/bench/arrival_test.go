package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The gaps must have mean 1/rate and coefficient of variation
// 1/sqrt(burstiness), as vLLM's gamma arrivals do. Checked over many
// seeds, on raw gaps (before the schedule is rescaled).
func TestInterArrivalsDistribution(t *testing.T) {
	for _, tt := range []struct{ rate, burstiness float64 }{
		{10, 1}, {10, 0.25}, {4, 4}, {100, 0.5},
	} {
		var gaps []float64
		for seed := range uint64(200) {
			rng := rand.New(rand.NewPCG(seed, 1))
			gaps = append(gaps, interArrivals(100, tt.rate, tt.burstiness, rng)...)
		}
		m := mean(gaps)
		cv := std(gaps) / m
		wantCV := 1 / math.Sqrt(tt.burstiness)
		if rel := math.Abs(m*tt.rate - 1); rel > 0.03 {
			t.Errorf("rate %v burstiness %v: mean gap %.5f s, want %.5f (±3%%)", tt.rate, tt.burstiness, m, 1/tt.rate)
		}
		if rel := math.Abs(cv/wantCV - 1); rel > 0.05 {
			t.Errorf("rate %v burstiness %v: CV %.3f, want %.3f (±5%%)", tt.rate, tt.burstiness, cv, wantCV)
		}
	}
}

func TestArrivalOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	t.Run("inf rate sends all at once", func(t *testing.T) {
		for _, off := range arrivalOffsets(50, math.Inf(1), 1, rng) {
			if off != 0 {
				t.Fatalf("offset %v, want 0", off)
			}
		}
	})
	t.Run("rescaled to n/rate and increasing", func(t *testing.T) {
		offs := arrivalOffsets(200, 20, 0.5, rng)
		if last, want := offs[len(offs)-1], 10*time.Second; (last - want).Abs() > time.Microsecond {
			t.Errorf("last offset %v, want %v (vLLM rescales to num_prompts/rate)", last, want)
		}
		for i := 1; i < len(offs); i++ {
			if offs[i] < offs[i-1] {
				t.Fatalf("offsets not sorted at %d: %v < %v", i, offs[i], offs[i-1])
			}
		}
	})
	t.Run("inf burstiness is evenly spaced", func(t *testing.T) {
		offs := arrivalOffsets(5, 2, math.Inf(1), rng)
		for i, off := range offs {
			if want := time.Duration(i+1) * 500 * time.Millisecond; (off - want).Abs() > time.Microsecond {
				t.Errorf("offset %d = %v, want %v", i, off, want)
			}
		}
	})
	t.Run("seeded", func(t *testing.T) {
		a := arrivalOffsets(20, 5, 1, rand.New(rand.NewPCG(3, 1)))
		b := arrivalOffsets(20, 5, 1, rand.New(rand.NewPCG(3, 1)))
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("same seed gave different schedules at %d", i)
			}
		}
	})
}
