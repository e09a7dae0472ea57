package sim

import (
	"math"
	"testing"
	"time"
)

func TestStepModelSeededJitter(t *testing.T) {
	cfg := DefaultConfig().Quiet()
	cfg.Jitter = 0.05
	steps := func(seed int64) []time.Duration {
		c := cfg
		c.Seed = seed
		m := newStepModel(c)
		out := make([]time.Duration, 1000)
		for i := range out {
			out[i] = m.duration(stepWork{seqs: i % 64}, 0)
		}
		return out
	}
	a, b, other := steps(3), steps(3), steps(4)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d: %v vs %v with the same seed", i, a[i], b[i])
		}
	}
	same := 0
	for i := range a {
		if a[i] == other[i] {
			same++
		}
	}
	if same > 10 {
		t.Errorf("%d of %d steps equal across seeds", same, len(a))
	}

	// The relative deviation from the nominal time has the configured spread.
	var sum, sq float64
	for i, d := range a {
		nominal := float64(cfg.DecodeStep + cfg.PerSeqCost*time.Duration(i%64))
		rel := float64(d)/nominal - 1
		sum += rel
		sq += rel * rel
	}
	mean := sum / float64(len(a))
	std := math.Sqrt(sq/float64(len(a)) - mean*mean)
	if math.Abs(mean) > 0.01 || std < 0.04 || std > 0.06 {
		t.Errorf("relative jitter mean %.4f std %.4f, want ~0 and ~0.05", mean, std)
	}
}

func TestStepModelFormula(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = 8 * time.Millisecond
	cfg.PerSeqCost = 40 * time.Microsecond
	cfg.BaseTTFT = 15 * time.Millisecond
	cfg.PrefillPerToken = 20 * time.Microsecond
	cfg.PrefillStepOverhead = 3 * time.Millisecond
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		name     string
		slowdown float64
		w        stepWork
		want     time.Duration
	}{
		{"one decode", 1, stepWork{seqs: 1, decodeSeqs: 1}, 8*ms + 40*us},
		{"ten decodes", 1, stepWork{seqs: 10, decodeSeqs: 10}, 8*ms + 400*us},
		{"one prefill of 100", 1, stepWork{seqs: 1, prefillTokens: 100, prefillStarts: 1}, 8*ms + 40*us + 3*ms + 15*ms + 2*ms},
		{"two prefills in a decoding batch: one batched prefill", 1, stepWork{seqs: 4, decodeSeqs: 2, prefillTokens: 51, prefillStarts: 2}, 8*ms + 160*us + 3*ms + 15*ms + 1020*us},
		{"fifteen 128-token prompts together", 1, stepWork{seqs: 15, prefillTokens: 15 * 128, prefillStarts: 15}, 8*ms + 600*us + 3*ms + 15*ms + 38400*us},
		{"a prefill chunk continues", 1, stepWork{seqs: 2, decodeSeqs: 1, prefillTokens: 50}, 8*ms + 80*us + 3*ms + time.Millisecond},
		{"slowdown 2", 2, stepWork{seqs: 10, decodeSeqs: 10}, 2 * (8*ms + 400*us)},
	}
	for _, tt := range tests {
		c := cfg
		c.Slowdown = tt.slowdown
		m := newStepModel(c)
		if got := m.duration(tt.w, time.Hour); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Full jitter must never give a negative step.
	c := cfg
	c.Jitter = 1
	m := newStepModel(c)
	for range 10000 {
		if d := m.duration(stepWork{seqs: 1}, 0); d < 0 {
			t.Fatalf("negative step %v", d)
		}
	}
}
