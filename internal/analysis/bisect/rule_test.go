package bisect

import (
	"math"
	"testing"
)

// around returns n log values with mean m and sample spread about sd.
func around(m, sd float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		// Evenly spread ±sd·√3: a fixed sample with standard deviation ≈ sd.
		out[i] = m + sd*math.Sqrt(3)*(2*float64(i)/float64(max(n-1, 1))-1)
	}
	return out
}

func TestCompare(t *testing.T) {
	t.Parallel()
	r := DefaultRule()
	noise := func(df float64) Noise { return Noise{Sigma: 0.02, DF: df} }
	ln := math.Log1p
	cases := []struct {
		name   string
		a, b   []float64
		n      Noise
		margin float64
		dir    float64
		want   Outcome
	}{
		{"same level, many runs", around(0, 0.02, 12), around(0, 0.02, 12), noise(40), ln(0.1) / 2, 1, Same},
		{"a 10% step, three runs each", around(0, 0.02, 3), around(ln(0.1), 0.02, 3), noise(20), ln(0.1) / 2, 1, Different},
		{"a 10% step the other way is not the change chased", around(0, 0.02, 3), around(-ln(0.1), 0.02, 3), noise(20), ln(0.1) / 2, 1, Same},
		{"two-sided, the other way is different", around(0, 0.02, 3), around(-ln(0.1), 0.02, 3), noise(20), ln(0.03), 0, Different},
		{"two fifths of the way, three runs: unknown", around(0, 0.02, 3), around(ln(0.04), 0.02, 3), noise(20), ln(0.1) / 2, 1, Unknown},
		{"significant but under MinChange: not different", around(0, 0.02, 12), around(ln(0.02), 0.02, 12), Noise{Sigma: 0.002, DF: 100}, ln(0.03), 0, Same},
		{"no noise estimate: unknown", []float64{0}, []float64{1}, Noise{Sigma: math.NaN()}, 0.1, 1, Unknown},
		{"empty: unknown", nil, []float64{1}, noise(10), 0.1, 1, Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Compare(tc.a, tc.b, tc.n, tc.margin, tc.dir)
			if got.Outcome != tc.want {
				t.Errorf("Compare = %+v, want %s", got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	r := DefaultRule()
	exp := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = 100 * math.Exp(x)
		}
		return out
	}
	good, bad := exp(around(0, 0.01, 6)), exp(around(math.Log(1.2), 0.01, 6))
	cases := []struct {
		name    string
		commit  []float64
		bad     []float64
		verdict Verdict
		between bool
	}{
		{"at good", exp(around(0.005, 0.01, 3)), bad, Good, false},
		{"at bad", exp(around(math.Log(1.19), 0.01, 3)), bad, Bad, false},
		{"halfway: a second change", exp(around(math.Log(1.1), 0.01, 6)), bad, Bad, true},
		{"no bad end: within MinChange of good", exp(around(0.005, 0.01, 6)), nil, Good, false},
		{"no bad end: 20% away", exp(around(math.Log(1.2), 0.01, 3)), nil, Bad, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := r.Judge(good, tc.commit, tc.bad)
			if j.Verdict != tc.verdict || j.Between != tc.between {
				t.Errorf("Judge = %+v, want %s (between %v)", j, tc.verdict, tc.between)
			}
		})
	}
	// Without a bad end, the direction says which way is the change.
	faster := exp(around(math.Log(0.8), 0.01, 3))
	if j := r.JudgeToward(good, faster, +1); j.Verdict != Good {
		t.Errorf("20%% lower, chasing a rise: %+v, want good", j)
	}
	if j := r.JudgeToward(good, faster, -1); j.Verdict != Bad {
		t.Errorf("20%% lower, chasing a drop: %+v, want bad", j)
	}
	if j := r.JudgeToward(good, faster, 0); j.Verdict != Bad {
		t.Errorf("20%% lower, either way: %+v, want bad", j)
	}
	if c := r.CompareEnds(good, bad); c.Outcome != Different || math.Abs(c.Change()-0.2) > 0.01 {
		t.Errorf("CompareEnds = %+v, want different by +20%%", c)
	}
}

func TestComparePairs(t *testing.T) {
	t.Parallel()
	ref := []float64{100, 130, 101, 99, 125, 100}       // a machine that drifts and bursts
	same := []float64{100.5, 129, 100.2, 99.8, 126, 99} // moved with it
	slow := []float64{108, 140.4, 109, 107, 135, 108.3} // +8% on top of it
	cases := []struct {
		name      string
		commit    []float64
		dir       float64
		min       float64
		want      Outcome
		wantAbove float64
	}{
		{"the same commit on a drifting machine", same, 1, 0.03, Same, -1},
		{"+8% on a drifting machine", slow, 1, 0.03, Different, 0.07},
		{"+8% is not the change when chasing a drop", slow, -1, 0.03, Unknown, 0.07},
		{"+8% is, with confidence, within a 10% smallest change", slow, 1, 0.10, Same, 0.07},
	}
	for _, tc := range cases {
		r := DefaultRule()
		r.MinChange = tc.min
		c := r.ComparePairs(tc.commit, ref, tc.dir)
		if c.Outcome != tc.want || c.Change() < tc.wantAbove {
			t.Errorf("%s: %s (%s), want %s", tc.name, c.Outcome, pct(c.Change()), tc.want)
		}
	}
}
