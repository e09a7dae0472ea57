package sim

import (
	"math/rand/v2"
	"time"
)

// stepModel prices one engine step. It owns the jitter RNG, so the sequence
// of step times for a given seed and load is reproducible.
type stepModel struct {
	decode     time.Duration
	perSeq     time.Duration
	slowdown   float64
	jitter     float64
	rng        *rand.Rand
	baseTTFT   time.Duration
	prefillTok time.Duration
}

// Distinct PCG streams keep the jitter sequence independent of how many
// error-rate draws the handlers make.
const (
	streamJitter = 1
	streamErrors = 2
)

func newStepModel(cfg Config) *stepModel {
	return &stepModel{
		decode:     cfg.DecodeStep,
		perSeq:     cfg.PerSeqCost,
		slowdown:   cfg.Slowdown,
		jitter:     cfg.Jitter,
		rng:        rand.New(rand.NewPCG(uint64(cfg.Seed), streamJitter)),
		baseTTFT:   cfg.BaseTTFT,
		prefillTok: cfg.PrefillPerToken,
	}
}

// prefill is the time a newly admitted request adds to its first step.
func (m *stepModel) prefill(promptTokens int) time.Duration {
	return m.baseTTFT + m.prefillTok*time.Duration(promptTokens)
}

// duration returns the time of a step with running sequences in the batch
// and prefill time for the requests admitted in it.
func (m *stepModel) duration(running int, prefill time.Duration) time.Duration {
	base := m.decode + m.perSeq*time.Duration(running) + prefill
	f := m.slowdown
	if m.jitter > 0 {
		f *= 1 + m.jitter*m.rng.NormFloat64()
	}
	if f <= 0 || base <= 0 {
		return 0
	}
	return time.Duration(float64(base) * f)
}
