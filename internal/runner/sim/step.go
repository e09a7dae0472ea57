package sim

import (
	"math/rand/v2"
	"time"
)

// stepWork is what one engine step computes.
type stepWork struct {
	seqs          int // sequences scheduled (decoding and prefilling)
	decodeSeqs    int
	prefillTokens int // prompt tokens computed (cache hits excluded)
	prefillStarts int // sequences whose prefill or recompute begins
}

// stepModel prices one engine step. It owns the jitter RNG and the noise
// model, so the sequence of step times for a given seed and load is
// reproducible.
type stepModel struct {
	decode     time.Duration
	perSeq     time.Duration
	baseTTFT   time.Duration
	prefillTok time.Duration
	overhead   time.Duration
	slowdown   float64
	jitter     float64
	rng        *rand.Rand
	noise      *noiseModel
	lastNoise  float64 // noise factor of the last step priced
}

func newStepModel(cfg Config) *stepModel {
	return &stepModel{
		decode:     cfg.DecodeStep,
		perSeq:     cfg.PerSeqCost,
		baseTTFT:   cfg.BaseTTFT,
		prefillTok: cfg.PrefillPerToken,
		overhead:   cfg.PrefillStepOverhead,
		slowdown:   cfg.Slowdown,
		jitter:     cfg.Jitter,
		rng:        rand.New(rand.NewPCG(uint64(cfg.Seed), streamJitter)),
		noise:      newNoiseModel(cfg.Noise, cfg.Seed),
	}
}

// nominal is the step's time before slowdown and noise. A step that
// computes prompt tokens pays the overhead of a mixed batch once (it cannot
// take the decode-only fast path). Prefill is priced from the batch's
// tokens, as a GPU runs it: one batched prefill, whatever the number of
// prompts in it, so a step in which prefills start pays the fixed
// prefill cost (base TTFT) once, and every prompt token computed its
// per-token cost. Fifteen 128-token prompts arriving together cost one
// base TTFT and 1,920 tokens, not fifteen base TTFTs.
func (m *stepModel) nominal(w stepWork) time.Duration {
	d := m.decode + m.perSeq*time.Duration(w.seqs) + m.prefillTok*time.Duration(w.prefillTokens)
	if w.prefillStarts > 0 {
		d += m.baseTTFT
	}
	if w.prefillTokens > 0 || w.prefillStarts > 0 {
		d += m.overhead
	}
	return d
}

// duration returns the time of a step doing w that starts `at` after engine
// start.
func (m *stepModel) duration(w stepWork, at time.Duration) time.Duration {
	base := m.nominal(w)
	m.lastNoise = m.noise.factor(at)
	f := m.slowdown * m.lastNoise
	if m.jitter > 0 {
		f *= 1 + m.jitter*m.rng.NormFloat64()
	}
	if f <= 0 || base <= 0 {
		return 0
	}
	return time.Duration(float64(base) * f)
}
