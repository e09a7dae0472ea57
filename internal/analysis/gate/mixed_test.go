package gate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// mixedJob draws one interleaved job of n pairs in the agent's order
// (B | H H | B B | …, a side's engine starting when the order changes
// side) under known components, the head shifted by delta.
func mixedJob(rng *rand.Rand, job, n int, c mixedComponents, delta float64) []mixedRun {
	var out []mixedRun
	level := rng.NormFloat64() // the job's shift: the model's fixed μ_j
	walk, start, state, last := 0.0, 0, 0.0, -1
	pos := 0
	put := func(head bool) {
		side := 0
		if head {
			side = 1
		}
		if side != last {
			start++
			last = side
			state = math.Sqrt(c.Start) * rng.NormFloat64()
		}
		pos++
		walk += math.Sqrt(c.Drift) * rng.NormFloat64()
		e := math.Sqrt(c.Run) * rng.NormFloat64()
		y := level + state + walk + e
		if head {
			y += delta + math.Sqrt(c.HeadRun)*rng.NormFloat64()
		}
		out = append(out, mixedRun{job: job, y: y, head: head, start: start, pos: pos})
	}
	for i := 0; i < n; i++ {
		put(i%2 == 1)
		put(i%2 == 0)
	}
	return out
}

// REML recovers known variance components and the shift from many jobs
// of the agent's design, starts of one and two runs.
func TestREMLRecoversComponents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		start, run   float64 // SDs
		delta        float64
		wantBoundary bool
	}{
		{"no start state", 0, 0.02, 0, true},
		{"start 2%, run 2%", 0.02, 0.02, 0.05, false},
		{"start 3%, run 2%", 0.03, 0.02, 0, false},
		{"start 5%, run 3%", 0.05, 0.03, 0.05, false},
		{"start 1%, run 4%", 0.01, 0.04, -0.03, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(1000*tc.start+100*tc.run)))
			c := mixedComponents{Start: tc.start * tc.start, Run: tc.run * tc.run}
			var runs []mixedRun
			for j := 0; j < 300; j++ {
				runs = append(runs, mixedJob(rng, j, 8, c, tc.delta)...)
			}
			f := remlFit(runs)
			if !f.ok {
				t.Fatal("no fit")
			}
			// 300 jobs: ~2400 starts and ~2100 within-start differences.
			if got := math.Sqrt(f.comp.Run); math.Abs(got-tc.run) > 0.06*tc.run {
				t.Errorf("run SD %.4f, want %.4f", got, tc.run)
			}
			if got := math.Sqrt(f.comp.Start); math.Abs(got-tc.start) > 0.1*tc.start+0.004 {
				t.Errorf("start SD %.4f, want %.4f", got, tc.start)
			}
			if f.boundary != tc.wantBoundary && tc.start >= 0.02 {
				t.Errorf("boundary %v with start SD %.3f", f.boundary, tc.start)
			}
			if math.Abs(f.d-tc.delta) > 4*f.se {
				t.Errorf("δ %.4f ± %.4f, want %.4f", f.d, f.se, tc.delta)
			}
			// The oracle with the true components agrees on δ, and its
			// standard error is no larger than the estimated model's by
			// more than the estimation's noise.
			o := oracleGLS(runs, c)
			if !o.ok || math.Abs(o.d-tc.delta) > 4*o.se || o.se > 1.05*f.se {
				t.Errorf("oracle δ %.4f ± %.4f, REML ± %.4f", o.d, o.se, f.se)
			}
		})
	}
}

// The reference tests hold their level on A/A jobs of the first look's
// size (8 pairs): at α = 5% they call about 5% of unchanged PRs worse,
// with and without a start state and drift. The oracle is exact; REML's
// pooling when the start variance is estimated 0 may cost a little.
func TestReferenceTestsHoldAlpha(t *testing.T) {
	t.Parallel()
	const alpha, n = 0.05, 3000
	for _, tc := range []struct {
		name string
		c    mixedComponents
	}{
		{"run noise only", mixedComponents{Run: 0.02 * 0.02}},
		{"start 3%", mixedComponents{Start: 0.03 * 0.03, Run: 0.02 * 0.02}},
		{"start 5%, drift 0.5%/run", mixedComponents{Start: 0.05 * 0.05, Drift: 0.005 * 0.005, Run: 0.03 * 0.03}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(2, uint64(len(tc.name))))
			var oracle, reml int
			for g := 0; g < n; g++ {
				runs := mixedJob(rng, 0, 8, tc.c, 0)
				if oracleGLS(runs, tc.c).p() <= alpha {
					oracle++
				}
				if remlFit(runs).p() <= alpha {
					reml++
				}
			}
			lo, hi := stats.ClopperPearson(int(alpha*n), n, 0.999)
			if r := float64(oracle) / n; r < lo || r > hi {
				t.Errorf("oracle A/A %.3f, want within [%.3f, %.3f]", r, lo, hi)
			}
			// REML ignores the drift and pools at the boundary: a
			// tolerance of 2 points above α, none below half of it.
			if r := float64(reml) / n; r < alpha/2 || r > alpha+0.02 {
				t.Errorf("REML A/A %.3f at α %.2f", r, alpha)
			}
		})
	}
}

// Calibration picks the level that calls at most α of the A/A p-values
// and measures power there; ties never push it past α.
func TestCalibrate(t *testing.T) {
	t.Parallel()
	null := []float64{0.001, 0.002, 0.002, 0.01, 0.2, 0.3, 0.4, 0.5, 0.6, 0.9}
	for _, tc := range []struct {
		alpha     float64
		wantLevel float64
		wantAA    float64
	}{
		{0.1, 0.001, 0.1},
		{0.2, 0.001, 0.1}, // 0.002 ties with the 3rd: stay at one
		{0.3, 0.002, 0.3},
		{0.05, 0.0005, 0},
	} {
		r := calibrate(tc.alpha, null, [][]float64{{0.0001, 0.001, 0.0015, 0.5}})
		if r.Level != tc.wantLevel || r.AA != tc.wantAA {
			t.Errorf("α %.2f: level %g AA %g, want %g %g", tc.alpha, r.Level, r.AA, tc.wantLevel, tc.wantAA)
		}
	}
	r := calibrate(0.3, null, [][]float64{{0.0001, 0.001, 0.0015, 0.5}})
	if r.Detection[0] != 0.75 || r.NominalAA != 0.6 {
		t.Errorf("detection %v nominal A/A %v", r.Detection, r.NominalAA)
	}
}
