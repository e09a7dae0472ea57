package gate

import (
	"math"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// History is what the gate knows about the noise of unchanged code. Runs
// vary in two ways: from run to run within one session (one engine start
// on one card: the GPU clock, the scheduler's state) and from session to
// session (another day, another engine start, another thermal state). The
// runs of one session tell only the first; the spread of session means
// tells the second, which a stored baseline compared with today's runs
// carries in full.
type History struct {
	// Sessions are earlier run sets of unchanged code, one session each:
	// every baseline promotion and every A/A run set. Their within-set
	// spread is the prior for the run-to-run variance; the spread of their
	// means, beyond what the run-to-run variance explains, estimates the
	// session-to-session variance.
	Sessions []Session `json:"sessions,omitempty"`
	// Paired are earlier interleaved jobs (A/A, or any PR's: a constant
	// effect does not move the spread of its pairs around their mean). The
	// residual spread of their per-pair ratios is the prior for a paired
	// comparison; without them the prior is twice the run-to-run variance.
	Paired [][]Pair `json:"-"`
}

// Session is one set of runs measured in one engine session.
type Session struct {
	Label string           `json:"label"` // e.g. "baseline #3 (v0.26.0)"
	Runs  []*result.Result `json:"-"`
}

// SessionPriorDF is the weight, in degrees of freedom, of the tier's
// session_noise assumption against the session means of the history: the
// assumption counts as much as nine sessions. With fewer sessions than
// that it dominates; a long history replaces it.
const SessionPriorDF = 8

// PairPriorDF caps the weight of the history's pair-difference variance
// in a paired comparison (ν₀): the current pairs always count.
const PairPriorDF = 16

// maxDF stands for "known": a t with this many degrees of freedom is the
// normal to six digits.
const maxDF = 1e6

// pooled is a sum of squared deviations and its degrees of freedom.
type pooled struct{ ss, df float64 }

func (p pooled) variance() float64 {
	if p.df <= 0 {
		return math.NaN()
	}
	return p.ss / p.df
}

func (p *pooled) add(xs []float64) {
	if len(xs) >= 2 {
		p.ss += stats.SumSq(xs)
		p.df += float64(len(xs) - 1)
	}
}

// sessionVariance estimates the session-to-session variance from session
// means: each mean scatters by σ_s² + σ_r²/n, so the excess of their
// sample variance over the run-to-run part is σ_s² (floored at zero). The
// tier's assumption, prior σ₀² with priorDF degrees of freedom, is pooled
// with it. It returns the variance and its degrees of freedom (maxDF when
// nothing but a zero prior speaks, i.e. no session term).
func sessionVariance(means []float64, sizes []int, runVar, prior, priorDF float64) (float64, float64) {
	ss, df := 0.0, 0.0
	if len(means) >= 2 {
		invN := 0.0
		for _, n := range sizes {
			invN += 1 / float64(n)
		}
		invN /= float64(len(sizes))
		excess := stats.Variance(means) - runVar*invN
		if math.IsNaN(excess) || excess < 0 {
			excess = 0
		}
		df = float64(len(means) - 1)
		ss = df * excess
	}
	if prior > 0 && priorDF > 0 {
		ss += priorDF * prior
		df += priorDF
	}
	if df == 0 {
		return 0, maxDF
	}
	return ss / df, df
}

// satterthwaite is the degrees of freedom of a sum of two independent
// variance estimates a (dfA) and b (dfB).
func satterthwaite(a, dfA, b, dfB float64) float64 {
	den := 0.0
	if a > 0 {
		den += a * a / dfA
	}
	if b > 0 {
		den += b * b / dfB
	}
	if den <= 0 || math.IsNaN(den) {
		return math.Min(math.Max(dfA, 1), maxDF)
	}
	return math.Min((a+b)*(a+b)/den, maxDF)
}

// medianVarianceFactor is Var(median of k means)/Var(one mean) for normal
// means (an even k averages the middle two): tabled for k ≤ 9, the
// asymptotic π/2k (slightly larger, so conservative) beyond.
func medianVarianceFactor(k int) float64 {
	table := [...]float64{1, 1, 0.5, 0.4487, 0.2982, 0.2868, 0.2147, 0.2104, 0.1682, 0.1661}
	if k < len(table) {
		return table[max(k, 0)]
	}
	return math.Pi / (2 * float64(k))
}
