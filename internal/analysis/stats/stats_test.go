package stats

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestTQuantile(t *testing.T) {
	t.Parallel()
	// Reference values from standard t tables.
	cases := []struct{ p, df, want float64 }{
		{0.975, 10, 2.228139},
		{0.995, 4, 4.604095},
		{0.995, 8, 3.355387},
		{0.95, 1, 6.313752},
		{0.999, 30, 3.385185},
		{0.995, 1e6, 2.575835},
		{0.9999, 2, 70.70007},
		{0.999999, 5, 24.77103},
		{0.99, 7.5, 2.943099},
		{0.05, 10, -1.812461},
	}
	for _, tc := range cases {
		if got := TQuantile(tc.p, tc.df); math.Abs(got-tc.want) > 1e-4*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("TQuantile(%g, %g) = %g, want %g", tc.p, tc.df, got, tc.want)
		}
		if got := TCDF(tc.want, tc.df); math.Abs(got-tc.p) > 1e-6 {
			t.Errorf("TCDF(%g, %g) = %g, want %g", tc.want, tc.df, got, tc.p)
		}
		// The quantile inverts the distribution function to high accuracy.
		if got := TCDF(TQuantile(tc.p, tc.df), tc.df); math.Abs(got-tc.p) > 1e-10 {
			t.Errorf("TCDF(%g, %g) = %g, want %g", tc.want, tc.df, got, tc.p)
		}
	}
}

func TestMannWhitney(t *testing.T) {
	t.Parallel()
	cases := []struct {
		x, y []float64
		want float64
	}{
		// 3 vs 3 fully separated: the smallest two-sided p is 2/20 = 0.1.
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 0.1},
		// 5 vs 5 separated: 2/252.
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252},
		{[]float64{1, 3, 5}, []float64{2, 4, 6}, 0.7},
		{[]float64{1, 1, 1}, []float64{1, 1, 1}, 1},
	}
	for _, tc := range cases {
		if got := MannWhitney(tc.x, tc.y); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("MannWhitney(%v, %v) = %g, want %g", tc.x, tc.y, got, tc.want)
		}
	}
}

func TestHolm(t *testing.T) {
	t.Parallel()
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("Holm = %v, want %v", got, want)
			break
		}
	}
}

// A NaN p-value (a test that could not be computed) must neither stop the
// sort nor shrink the family: Holm([.003 .002 NaN .001]) corrects the three
// real p-values for a family of four and returns no NaN.
func TestHolmNaN(t *testing.T) {
	t.Parallel()
	got := Holm([]float64{0.003, 0.002, math.NaN(), 0.001})
	want := []float64{0.006, 0.006, 1, 0.004}
	for i := range want {
		if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	for _, p := range [][]float64{{math.NaN()}, {math.NaN(), math.NaN(), 0.01}, {1.5, -0.1}} {
		for i, v := range Holm(p) {
			if math.IsNaN(v) || v < 0 || v > 1 {
				t.Errorf("Holm(%v)[%d] = %v", p, i, v)
			}
		}
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	s := []float64{1, 2, 3, 4}
	if Quantile(s, 0.5) != 2.5 || Quantile(s, 0) != 1 || Quantile(s, 1) != 4 || Median([]float64{3, 1, 2}) != 2 {
		t.Error("quantile interpolation")
	}
}

// The order-statistic draw must spread like a resampling bootstrap of the
// same quantile.
func TestQuantileDrawMatchesResampling(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float64, 1000)
	for i := range data {
		data[i] = rng.ExpFloat64()
	}
	sort.Float64s(data)
	const b = 2000
	var fast, slow []float64
	res := make([]float64, len(data))
	for i := 0; i < b; i++ {
		fast = append(fast, QuantileDraw(rng, data, 0.99))
		for j := range res {
			res[j] = data[rng.IntN(len(data))]
		}
		sort.Float64s(res)
		slow = append(slow, Quantile(res, 0.99))
	}
	sf, ss := math.Sqrt(Variance(fast)), math.Sqrt(Variance(slow))
	if math.Abs(sf/ss-1) > 0.15 || math.Abs(Mean(fast)/Mean(slow)-1) > 0.02 {
		t.Errorf("order-statistic bootstrap sd %g mean %g, resampling sd %g mean %g", sf, Mean(fast), ss, Mean(slow))
	}
}
