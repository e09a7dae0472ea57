package capacity

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// engineWithKnee answers a step the way an engine whose knee is at knee
// requests/s would: every request good up to it, a third past it.
func engineWithKnee(knee float64) func(rate float64) Step {
	return func(rate float64) Step {
		st := Step{Rate: rate, Arrivals: "constant", Sent: 100, Throughput: rate, TTFTp99ms: 50}
		if rate <= knee {
			st.Good = 100
		} else {
			st.Good, st.Throughput, st.TTFTp99ms = 33, knee, 5000
		}
		return st
	}
}

func runSweep(t *testing.T, s *Sweep, measure func(float64) Step) []float64 {
	t.Helper()
	var tried []float64
	for {
		r, ok := s.Next()
		if !ok {
			return tried
		}
		tried = append(tried, r)
		if err := s.Observe(measure(r)); err != nil {
			t.Fatalf("observe %g: %v", r, err)
		}
	}
}

func TestSweepFindsKnee(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		knee      float64
		plan      Plan
		wantTried []float64
		wantKnee  Knee
	}{
		{"between fixed rates", 5, Plan{}, []float64{1, 2, 4, 8, 5.66, 4.76, 5.19},
			Knee{Rate: 4.76, Below: 5.19, Steps: 7}},
		{"on a fixed rate", 8, Plan{}, []float64{1, 2, 4, 8, 16, 11.3, 9.51, 8.72},
			Knee{Rate: 8, Below: 8.72, Steps: 8}},
		{"above the plan", 100, Plan{}, []float64{1, 2, 4, 8, 16, 32},
			Knee{Rate: 32, Censored: true, Steps: 6}},
		{"below the lowest rate", 0.3, Plan{}, []float64{1, 0.5, 0.25, 0.354, 0.297, 0.324},
			Knee{Rate: 0.297, Below: 0.324, Steps: 6}},
		{"nothing sustained", 0, Plan{Rates: []float64{1, 2}}, []float64{1, 0.5, 0.25, 0.125, 0.0625},
			Knee{Rate: 0, Below: 0.0625, Steps: 5}},
		{"step cap", 5, Plan{MaxSteps: 6}, []float64{1, 2, 4, 8, 5.66, 4.76},
			Knee{Rate: 4.76, Below: 5.66, Steps: 6}},
		{"coarse resolution", 5, Plan{Resolution: 0.5}, []float64{1, 2, 4, 8, 5.66},
			Knee{Rate: 4, Below: 5.66, Steps: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewSweep(tc.plan, SLO{TTFTms: 500})
			if err != nil {
				t.Fatal(err)
			}
			tried := runSweep(t, s, engineWithKnee(tc.knee))
			if !equalRates(tried, tc.wantTried) {
				t.Errorf("tried %v, want %v", tried, tc.wantTried)
			}
			if got := s.Knee(); got != tc.wantKnee {
				t.Errorf("knee %+v, want %+v", got, tc.wantKnee)
			}
		})
	}
}

// A rate sustained above one that failed (noise at the knee) must not
// lift the knee past the failure.
func TestSweepFailureBoundsKnee(t *testing.T) {
	t.Parallel()
	s, err := NewSweep(Plan{Rates: []float64{1, 2, 4}}, SLO{TTFTms: 500})
	if err != nil {
		t.Fatal(err)
	}
	s.Steps = []Judged{
		{Step: Step{Rate: 1}, Sustained: true},
		{Step: Step{Rate: 2}, Sustained: false},
		{Step: Step{Rate: 4}, Sustained: true},
	}
	if k := s.Knee(); k.Rate != 1 || k.Below != 2 {
		t.Errorf("knee %+v: want 1 below 2", k)
	}
}

func TestSweepObserveStale(t *testing.T) {
	t.Parallel()
	s, err := NewSweep(Plan{}, SLO{TTFTms: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Observe(Step{Rate: 2, Sent: 1, Good: 1}); !errors.Is(err, ErrStale) {
		t.Fatalf("observe of rate 2 while 1 is pending: %v, want ErrStale", err)
	}
	if len(s.Steps) != 0 {
		t.Fatalf("a stale step was recorded")
	}
}

func TestPlanAndSLOValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		plan Plan
		slo  SLO
		ok   bool
	}{
		{"defaults", Plan{}, SLO{TTFTms: 500}, true},
		{"no slo", Plan{}, SLO{}, false},
		{"negative slo", Plan{}, SLO{TTFTms: 500, TPOTms: -1}, false},
		{"falling rates", Plan{Rates: []float64{4, 2}}, SLO{TTFTms: 500}, false},
		{"zero rate", Plan{Rates: []float64{0, 2}}, SLO{TTFTms: 500}, false},
		{"too few steps", Plan{Rates: []float64{1, 2, 3}, MaxSteps: 2}, SLO{TTFTms: 500}, false},
		{"resolution above 1", Plan{Resolution: 2}, SLO{TTFTms: 500}, false},
		{"good fraction above 1", Plan{}, SLO{TTFTms: 500, MinGoodFraction: 1.5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewSweep(tc.plan, tc.slo)
			if (err == nil) != tc.ok {
				t.Errorf("NewSweep: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestSLOSustained(t *testing.T) {
	t.Parallel()
	slo := SLO{TTFTms: 500}
	for _, tc := range []struct {
		name string
		st   Step
		want bool
	}{
		{"all good", Step{Sent: 100, Good: 100}, true},
		{"95% good", Step{Sent: 100, Good: 95}, true},
		{"94% good", Step{Sent: 100, Good: 94}, false},
		{"good but 2% failed", Step{Sent: 100, Good: 98, Failed: 2}, false},
		{"1% failed", Step{Sent: 100, Good: 99, Failed: 1}, true},
		{"nothing sent", Step{}, false},
	} {
		if got := slo.Sustained(tc.st); got != tc.want {
			t.Errorf("%s: sustained %v, want %v", tc.name, got, tc.want)
		}
	}
}

func equalRates(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// A step the host distorted (the client's self-check failed) judges
// nothing: the sweep measures that rate again, and the knee is the
// engine's. When the host distorts a rate every time, the sweep stops and
// says it cannot tell, and the comparison never turns it into a verdict —
// least of all an improvement: a starved base that looks saturated at 2
// requests/s would otherwise make a worse head look better.
func TestDistortedSteps(t *testing.T) {
	t.Parallel()
	engine := engineWithKnee(8)
	distortOnce := map[float64]bool{2: true, 16: true}
	transient := func(r float64) Step {
		st := engine(r)
		if distortOnce[r] {
			delete(distortOnce, r)
			st.Good, st.TTFTp99ms, st.Distorted = 10, 9000, "schedule lag p99 900 ms > 125 ms"
		}
		return st
	}
	s, err := NewSweep(Plan{}, SLO{TTFTms: 500})
	if err != nil {
		t.Fatal(err)
	}
	tried := runSweep(t, s, transient)
	if want := []float64{1, 2, 2, 4, 8, 16, 16, 11.3, 9.51, 8.72}; !equalRates(tried, want) {
		t.Errorf("tried %v, want each distorted rate measured again: %v", tried, want)
	}
	if k := s.Knee(); k.Rate != 8 || k.Below != 8.72 || k.Distorted != "" {
		t.Errorf("knee %+v: want the engine's, 8 below 8.72", k)
	}

	starved, err := NewSweep(Plan{}, SLO{TTFTms: 500})
	if err != nil {
		t.Fatal(err)
	}
	always := func(r float64) Step {
		st := engine(r)
		if r >= 2 {
			st.Good, st.Distorted = 0, "client CPU 97% of 2 core(s) ≥ 90%"
		}
		return st
	}
	tried = runSweep(t, starved, always)
	if want := []float64{1, 2, 2, 2}; !equalRates(tried, want) {
		t.Errorf("tried %v, want %v: %d tries at the distorted rate, then stop", tried, want, 1+Remeasures)
	}
	base := starved.Knee()
	if base.Distorted == "" || base.Rate != 1 {
		t.Fatalf("starved sweep's knee %+v: want it marked distorted", base)
	}
	// A late client whose step the engine sustained at its full rate
	// anyway is the engine's answer: not measured again. One offered
	// short of its rate is not.
	late, err := NewSweep(Plan{}, SLO{TTFTms: 500})
	if err != nil {
		t.Fatal(err)
	}
	tried = runSweep(t, late, func(r float64) Step {
		st := engine(r)
		st.Distorted, st.Achieved = "schedule lag p99 40 ms > 31 ms", r
		if r == 4 {
			st.Achieved = 0.8 * r // sent short: the engine was under-loaded
		}
		return st
	})
	if want := []float64{1, 2, 4, 4, 4}; !equalRates(tried, want) {
		t.Errorf("late client: tried %v, want %v (sustained steps stand, a short-offered one is retried)", tried, want)
	}

	head := Knee{Rate: 4, Below: 4.4, Steps: 7} // a worse engine, measured cleanly
	c := Compare([]Knee{base}, []Knee{head}, 0.1)
	if c.Verdict != Inconclusive || !strings.Contains(c.Why, "cannot tell: base's sweep stopped because the host distorted") {
		t.Errorf("comparison %s: %s; want inconclusive, cannot tell", c.Verdict, c.Why)
	}
}
