package capacity

import (
	"encoding/json"
	"math"
	"testing"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	k := func(rate, below float64) Knee { return Knee{Rate: rate, Below: below} }
	censored := func(rate float64) Knee { return Knee{Rate: rate, Censored: true} }
	for _, tc := range []struct {
		name       string
		base, head []Knee
		want       Verdict
		change     float64
	}{
		{"same knee", []Knee{k(8, 8.7)}, []Knee{k(8, 8.7)}, Same, 0},
		{"within threshold", []Knee{k(8, 8.7)}, []Knee{k(7.6, 8)}, Same, -0.05},
		{"knee halves", []Knee{k(8, 8.7)}, []Knee{k(4, 4.4)}, Regression, -0.5},
		{"knee doubles", []Knee{k(4, 4.4)}, []Knee{k(8, 8.7)}, Improvement, 1},
		{"base never failed, head did", []Knee{censored(32)}, []Knee{k(16, 17)}, Regression, -0.5},
		{"both censored", []Knee{censored(32)}, []Knee{censored(32)}, Same, 0},
		// Head's median is 20% lower, but one head sweep failed only at a
		// rate above one base sweep's knee: the ranges overlap.
		{"repeats overlap", []Knee{k(8, 8.7), k(10, 11)}, []Knee{k(7, 7.5), k(7.4, 9)}, Inconclusive, -0.2},
		{"repeats apart", []Knee{k(8, 8.7), k(10, 11)}, []Knee{k(5, 5.5), k(5.2, 5.6)}, Regression, -0.433},
		{"no head sweep", []Knee{k(8, 8.7)}, nil, Inconclusive, 0},
		{"head sustains nothing", []Knee{k(8, 8.7)}, []Knee{k(0, 0.5)}, Regression, -1},
		{"base sustains nothing", []Knee{k(0, 0.5)}, []Knee{k(2, 2.2)}, Improvement, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Compare(tc.base, tc.head, 0.10)
			if c.Verdict != tc.want {
				t.Errorf("verdict %s (%s), want %s", c.Verdict, c.Why, tc.want)
			}
			if math.Abs(c.Change-tc.change) > 0.01 && !(math.IsInf(tc.change, 1) && math.IsInf(c.Change, 1)) {
				t.Errorf("change %.3f, want %.3f", c.Change, tc.change)
			}
			if c.Why == "" {
				t.Error("no reason given")
			}
		})
	}
}

// A censored knee's side has no upper bound (+Inf), which JSON cannot
// hold: the comparison is stored with the bound as null and read back
// unbounded (the capacity check used to fail with "json: unsupported
// value: +Inf" whenever a sweep never failed or stopped as distorted).
func TestComparisonJSONUnboundedSide(t *testing.T) {
	t.Parallel()
	c := Compare([]Knee{{Rate: 4, Censored: true, Distorted: "the host distorted every try"}}, []Knee{{Rate: 8, Below: 9}}, 0.1)
	if !math.IsInf(c.Base.High, 1) {
		t.Fatalf("base high %v, want +Inf for a censored knee", c.Base.High)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(back.Base.High, 1) || back.Head.High != 9 || back.Base.Low != 4 || back.Verdict != c.Verdict {
		t.Errorf("round trip %s → %+v, want %+v", b, back, c)
	}
}
