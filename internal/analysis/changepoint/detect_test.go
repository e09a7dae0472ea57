package changepoint

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/stats"
)

// series builds a piecewise-constant series with small deterministic noise.
func series(seed uint64, noise float64, segments ...[2]float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	var z []float64
	for _, s := range segments {
		for i := 0; i < int(s[0]); i++ {
			z = append(z, s[1]*(1+noise*rng.NormFloat64()))
		}
	}
	return z
}

func TestDetect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		z    []float64
		o    Options
		want []int
	}{
		{"flat", series(1, 0.01, [2]float64{60, 100}), Options{}, nil},
		{"one step up", series(2, 0.01, [2]float64{30, 100}, [2]float64{30, 105}), Options{}, []int{30}},
		{"one step down", series(3, 0.01, [2]float64{20, 100}, [2]float64{25, 90}), Options{}, []int{20}},
		{"two steps", series(4, 0.01, [2]float64{30, 100}, [2]float64{30, 110}, [2]float64{30, 100}), Options{}, []int{30, 60}},
		{"step near the end", series(5, 0.01, [2]float64{40, 100}, [2]float64{6, 110}), Options{}, []int{40}},
		{"long series, steps far apart", series(6, 0.02, [2]float64{200, 100}, [2]float64{300, 93}, [2]float64{230, 100}), Options{}, []int{200, 500}},
		{"small step dropped by min magnitude", series(7, 0.002, [2]float64{30, 100}, [2]float64{30, 101}), Options{MinMagnitude: 0.02}, nil},
		{"small step kept without it", series(7, 0.002, [2]float64{30, 100}, [2]float64{30, 101}), Options{}, []int{30}},
		{"constant", series(8, 0, [2]float64{40, 100}), Options{}, nil},
		{"noiseless step", series(9, 0, [2]float64{10, 100}, [2]float64{10, 120}), Options{}, []int{10}},
		{"too short", []float64{1, 2}, Options{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(tc.z, tc.o)
			var idx []int
			for _, c := range got {
				idx = append(idx, c.Index)
			}
			if !near(idx, tc.want, 1) {
				t.Fatalf("change points at %v, want %v (%+v)", idx, tc.want, got)
			}
			for _, c := range got {
				if c.PValue >= DefaultMaxPValue {
					t.Errorf("change point %d has p = %g, not below %g", c.Index, c.PValue, DefaultMaxPValue)
				}
			}
		})
	}
}

func near(got, want []int, tol int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if d := got[i] - want[i]; d < -tol || d > tol {
			return false
		}
	}
	return true
}

func TestChangePointStatistics(t *testing.T) {
	t.Parallel()
	z := series(11, 0.01, [2]float64{30, 100}, [2]float64{30, 105})
	cps := Detect(z, Options{})
	if len(cps) != 1 {
		t.Fatalf("got %d change points, want 1", len(cps))
	}
	c := cps[0]
	if c.NBefore+c.NAfter != len(z) {
		t.Errorf("segments cover %d+%d points, want %d", c.NBefore, c.NAfter, len(z))
	}
	if math.Abs(c.Change()-0.05) > 0.01 {
		t.Errorf("change = %.4f, want ≈ +0.05", c.Change())
	}
	if c.Magnitude() < math.Abs(c.Change()) {
		t.Errorf("magnitude %.4f below |change| %.4f", c.Magnitude(), c.Change())
	}
	if c.T <= 0 {
		t.Errorf("t = %g, want positive for a step up", c.T)
	}
}

// TestQHatBruteForce checks the prefix-sum divergence against the
// definition computed term by term.
func TestQHatBruteForce(t *testing.T) {
	t.Parallel()
	z := series(12, 0.05, [2]float64{7, 10}, [2]float64{6, 14})
	d := newDivisive(z)
	for s := 0; s < 3; s++ {
		for tau := s + 1; tau < len(z); tau++ {
			for kappa := tau + 1; kappa <= len(z); kappa++ {
				got, want := d.qhat(s, tau, kappa), bruteQ(z[s:tau], z[tau:kappa])
				if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Fatalf("Q(%d,%d,%d) = %g, want %g", s, tau, kappa, got, want)
				}
			}
		}
	}
}

func bruteQ(x, y []float64) float64 {
	n, m := float64(len(x)), float64(len(y))
	between, wx, wy := 0.0, 0.0, 0.0
	for _, a := range x {
		for _, b := range y {
			between += math.Abs(a - b)
		}
	}
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			wx += math.Abs(x[i] - x[j])
		}
	}
	for i := range y {
		for j := i + 1; j < len(y); j++ {
			wy += math.Abs(y[i] - y[j])
		}
	}
	e := 2 / (n * m) * between
	if n > 1 {
		e -= wx / (n * (n - 1) / 2)
	}
	if m > 1 {
		e -= wy / (m * (m - 1) / 2)
	}
	return n * m / (n + m) * e
}

func TestTTest(t *testing.T) {
	t.Parallel()
	a := []float64{19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0}
	b := []float64{28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7}
	cp := ttest(a, b)
	// Pooled t by hand: (22.51 − 19.37) / sqrt(s_p²·(1/10 + 1/10)) = 2.0740
	// with 18 df, just inside t(0.975, 18) = 2.1009, so p is just above 0.05.
	if math.Abs(cp.T-2.0740) > 1e-3 || cp.PValue <= 0.05 || cp.PValue > 0.055 {
		t.Fatalf("t = %.4f, p = %.5f; want 2.0740 and p just above 0.05", cp.T, cp.PValue)
	}
	if q := 2 * stats.TCDF(-stats.TQuantile(0.975, 18), 18); math.Abs(q-0.05) > 1e-6 {
		t.Fatalf("t-test p at the 0.975 quantile = %g, want 0.05", q)
	}
	if got := ttest([]float64{1}, []float64{2}); got.PValue != 1 {
		t.Errorf("one point each: p = %g, want 1", got.PValue)
	}
}

// TestSynthetic is the detector's measured quality on 1,000 series of 60
// nightly points with a 5% step at 2% noise, and 1,000 without a step, at
// the nightly pass's settings (window 30, p 0.001, minimum magnitude 3%).
//
//	go test -run Synthetic -v ./internal/analysis/changepoint
func TestSynthetic(t *testing.T) {
	t.Parallel()
	n := 1000
	if testing.Short() {
		n = 200
	}
	for _, o := range []Options{{Window: 30, MinMagnitude: 0.03}, {Window: 50, MinMagnitude: 0.03}, {Window: 30, MinMagnitude: 0.02}} {
		step := Evaluate(Synthetic{Series: n, Length: 60, Step: 0.05, Noise: 0.02, Seed: 1}, o)
		null := Evaluate(Synthetic{Series: n, Length: 60, Noise: 0.02, Seed: 2}, o)
		t.Logf("window %d, min magnitude %.0f%%: 5%% step at 2%% noise, %d series of 60 points: recall %.1f%% (%d/%d within ±2 points), false positives %.3f per series (%d in %d series); no step: %.3f per series (%d in %d series)",
			o.Window, 100*o.MinMagnitude, n, 100*step.Recall, step.Found, step.Series, step.FalsePerSeries, step.FalsePositives, step.SeriesWithFalse,
			null.FalsePerSeries, null.FalsePositives, null.SeriesWithFalse)
		if step.Recall < 0.94 {
			t.Errorf("recall %.3f below 0.94", step.Recall)
		}
		if step.FalsePerSeries > 0.09 || null.FalsePerSeries > 0.045 {
			t.Errorf("false positives per series %.3f (step) / %.3f (no step), want ≤ 0.09 / 0.045", step.FalsePerSeries, null.FalsePerSeries)
		}
	}
}
