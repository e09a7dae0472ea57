package gate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// fullRuns makes n runs of 1000 requests × 128 output tokens with every
// per-request array, and no aggregate keys, so Compare computes each
// statistic from the arrays and bootstraps them.
func fullRuns(rng *rand.Rand, n int) []*result.Result {
	out := make([]*result.Result, n)
	for i := range out {
		const reqs, toks = 1000, 128
		r := &result.Result{Completed: reqs, OutputThroughput: 5000 * (1 + 0.01*rng.NormFloat64()),
			RequestThroughput: 40, Metrics: map[string]float64{}, Perfgate: env()}
		r.Perfgate.TPOTs = make([]float64, reqs)
		r.Perfgate.E2ELs = make([]float64, reqs)
		r.TTFTs = make([]float64, reqs)
		r.ITLs = make([][]float64, reqs)
		r.Errors = make([]string, reqs)
		for q := 0; q < reqs; q++ {
			r.TTFTs[q] = 0.2 * math.Exp(0.3*rng.NormFloat64())
			gaps := make([]float64, toks-1)
			s := 0.0
			for g := range gaps {
				gaps[g] = 0.011 * math.Exp(0.2*rng.NormFloat64())
				s += gaps[g]
			}
			r.ITLs[q] = gaps
			r.Perfgate.TPOTs[q] = s * 1000 / float64(toks-1)
			r.Perfgate.E2ELs[q] = (r.TTFTs[q] + s) * 1000
		}
		out[i] = r
	}
	return out
}

// BenchmarkCompare times one merge-tier Compare of two 1000-prompt × 5-run
// result sets with full per-request arrays.
func BenchmarkCompare(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	base, cand := fullRuns(rng, 5), fullRuns(rng, 5)
	merge, _ := config.Default().Tier("merge")
	b.ResetTimer()
	for b.Loop() {
		if _, err := Compare(base, cand, merge, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
