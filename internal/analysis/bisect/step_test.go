package bisect

import (
	"math"
	"math/rand/v2"
	"testing"
)

// pairsAt is n interleaved pairs whose commit side sits change above the
// reference, each run with log-normal noise cv.
func pairsAt(rng *rand.Rand, n int, change, cv float64) Reading {
	var r Reading
	for range n {
		level := 40 * (1 + 0.1*rng.Float64()) // drift between pairs cancels
		r.RefValues = append(r.RefValues, level*math.Exp(cv*rng.NormFloat64()))
		r.Values = append(r.Values, level*(1+change)*math.Exp(cv*rng.NormFloat64()))
	}
	return r
}

// TestDecideStep: git bisect run's single step takes the server bisect's
// rule — "same" within half the ends' change, sized to the noise — so a
// good commit on a noisy machine is called good within the budget where
// the old ±MinChange margin asked for more pairs than it had.
func TestDecideStep(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := Config{}
	// measureEnds adds pairs as DecideEnds asks until it decides.
	measureEnds := func(change, cv float64) (Reading, StepDecision) {
		r := pairsAt(rng, 4, change, cv)
		for {
			d := DecideEnds(cfg, r)
			if d.Verdict != Undecided || d.More == 0 {
				return r, d
			}
			more := pairsAt(rng, d.More, change, cv)
			r.Values, r.RefValues = append(r.Values, more.Values...), append(r.RefValues, more.RefValues...)
		}
	}
	if _, d := measureEnds(0.08, 0.04); d.Verdict != Bad || d.Pairs < StepMinPairs || math.Abs(d.Change()-0.08) > 0.04 {
		t.Fatalf("ends +8%% at 4%% noise: %s at %d pairs (%s), want bad (they differ), measured to within half", d.Verdict, d.Pairs, d.Reason)
	}
	if d := DecideEnds(cfg, pairsAt(rng, 8, 0, 0.01)); d.Verdict != Good {
		t.Errorf("identical ends over 8 quiet pairs: %s (%s), want good (nothing to bisect)", d.Verdict, d.Reason)
	}
	if d := DecideEnds(cfg, pairsAt(rng, 3, 0.02, 0.06)); d.Verdict != Undecided || d.More < 3 {
		t.Errorf("3 noisy pairs of the ends: %s, %d more, want more pairs", d.Verdict, d.More)
	}

	// Walk commits at either level to a decision, as bisect run does.
	walk := func(change float64, ends *Reading, dir float64) StepDecision {
		r := pairsAt(rng, 3, change, 0.04)
		for {
			d := DecideStep(cfg, r, ends, dir)
			if d.Verdict != Undecided || d.More == 0 {
				return d
			}
			more := pairsAt(rng, d.More, change, 0.04)
			r.Values, r.RefValues = append(r.Values, more.Values...), append(r.RefValues, more.RefValues...)
		}
	}
	wrong, undecided := 0, 0
	for range 500 {
		for _, c := range []struct {
			change float64
			want   Verdict
		}{{0, Good}, {0.08, Bad}} {
			e, ed := measureEnds(0.08, 0.04)
			if ed.Verdict != Bad {
				t.Fatalf("ends +8%%: %s (%s)", ed.Verdict, ed.Reason)
			}
			d := walk(c.change, &e, 0)
			switch {
			case d.Verdict == Undecided:
				undecided++
			case d.Verdict != c.want:
				wrong++
				t.Logf("%+.0f%%: %s after %d pairs (%s)", 100*c.change, d.Verdict, d.Pairs, d.Reason)
			}
			if d.Pairs > StepConfig(cfg).MaxPairs {
				t.Fatalf("%d pairs, over the budget of %d", d.Pairs, StepConfig(cfg).MaxPairs)
			}
		}
	}
	if wrong > 5 || undecided > 10 {
		t.Errorf("of 1000 commits at 4%% run noise (each with its own ends): %d judged wrong, %d undecided at the budget; want ≤5 and ≤10", wrong, undecided)
	}

	// With ends, a commit that moved the other way does not have the
	// change: good, where the server's two-sided "same" stays unknown (a
	// 32-commit run beside a CPU hog skipped such a commit at -3.5% after
	// 48 pairs).
	e, _ := measureEnds(0.08, 0.02)
	if d := DecideStep(cfg, pairsAt(rng, 8, -0.06, 0.02), &e, 0); d.Verdict != Good {
		t.Errorf("-6%% with +8%% ends: %s (%s), want good", d.Verdict, d.Reason)
	}

	// Without ends the margin is MinChange both ways, and dir picks the
	// bad way: a commit 8% better is not bad when "worse" is asked.
	if d := DecideStep(cfg, pairsAt(rng, 16, -0.08, 0.01), nil, 1); d.Verdict == Bad {
		t.Errorf("8%% the other way, direction up: bad, want good or unknown (%s)", d.Reason)
	}
	if d := DecideStep(cfg, pairsAt(rng, 16, 0.08, 0.01), nil, 1); d.Verdict != Bad {
		t.Errorf("+8%% over 16 quiet pairs, no ends: %s (%s), want bad", d.Verdict, d.Reason)
	}
}
