package gate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// The plan's looks spend increments of the spending function: they add up
// to α exactly at the last look, the Pocock-type first look keeps about a
// third of α, and the O'Brien–Fleming-type one almost nothing.
func TestAlphaForLook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		plan       string
		firstShare float64 // α of look 1 / α
		tol        float64
	}{
		{PlanPocock, math.Log1p((math.E - 1) / 4), 1e-12},
		{PlanOBrienFleming, 0, 1e-5},
	} {
		total := 0.0
		prev := math.Inf(1)
		for k := 1; k <= 4; k++ {
			a := AlphaForLook(tc.plan, 0.005, k, 4)
			if k == 1 && math.Abs(a/0.005-tc.firstShare) > tc.tol {
				t.Errorf("%s: first look spends %g of α, want %g", tc.plan, a/0.005, tc.firstShare)
			}
			if tc.plan == PlanPocock && a >= prev {
				t.Errorf("%s: look %d spends %g, not less than look %d's %g", tc.plan, k, a, k-1, prev)
			}
			prev = a
			total += a
		}
		if math.Abs(total-0.005) > 1e-15 {
			t.Errorf("%s: 4 looks spent %g, want α = 0.005", tc.plan, total)
		}
		if a := AlphaForLook(tc.plan, 0.005, 5, 4); a != 0 {
			t.Errorf("%s: a fifth look of four spends %g", tc.plan, a)
		}
	}
	if a := AlphaForLook(PlanPocock, 0.005, 1, 1); a != 0.005 {
		t.Errorf("single look: %g", a)
	}
}

// Compare takes the budget and returns it with this look recorded; the
// budget round-trips through JSON, as a check row stores it; the last
// look is marked final and a look beyond it is refused.
func TestCompareSpendsTheBudget(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	tr := tier(0.05, 3, "tpot_p99")
	a1 := AlphaForLook(PlanPocock, 0.005, 1, DefaultMaxLooks)
	rep := compare(t, b, c, tr, Options{})
	if !near(rep.Alpha, a1) || rep.Look() != 1 || rep.Looks.Spent[0].CandidateRuns != 5 || rep.Looks.Spent[0].Verdict != Pass || rep.Looks.Final() {
		t.Fatalf("first look: α %g, budget %+v", rep.Alpha, rep.Looks)
	}
	raw, err := json.Marshal(rep.Looks)
	if err != nil {
		t.Fatal(err)
	}
	var stored Looks
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	a2 := AlphaForLook(PlanPocock, 0.005, 2, DefaultMaxLooks)
	rep = compare(t, b, append(c, runs(lat, 0.01, 0)...), tr, Options{Looks: stored})
	if !near(rep.Alpha, a2) || rep.Look() != 2 || !near(rep.Looks.SpentAlpha(), a1+a2) || rep.Looks.Spent[1].CandidateRuns != 10 {
		t.Errorf("second look: α %g, budget %+v", rep.Alpha, rep.Looks)
	}
	// The budget's α is the first look's, whatever the tier says later.
	tr.Confidence = 0.999
	if rep := compare(t, b, c, tr, Options{Looks: stored}); !near(rep.Looks.Alpha, 0.005) || !near(rep.Alpha, a2) {
		t.Errorf("stricter tier: budget α %g, look α %g", rep.Looks.Alpha, rep.Alpha)
	}
	last := Looks{Alpha: 0.005, Max: 2, Spent: []Look{{Alpha: 0.001}}}
	if rep := compare(t, b, c, tr, Options{Looks: last}); !rep.Looks.Final() {
		t.Errorf("look 2 of 2 not final: %+v", rep.Looks)
	}
	if _, err := Compare(b, c, tr, Options{Looks: Looks{Alpha: 0.005, Max: 1, Spent: []Look{{Alpha: 0.005}}}}); err == nil {
		t.Error("a spent budget: want an error")
	}
	// A budget stored in the old format (Share 1: a single look) still reads.
	if rep := compare(t, b, c, tr, Options{Looks: Looks{Share: 1}}); rep.Looks.Max != 1 || !near(rep.Alpha, 0.001) {
		t.Errorf("old single-look budget: %+v α %g", rep.Looks, rep.Alpha)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// A budget stored under the old halving rule continues under the bounded
// plan without ever spending more than α in all.
func TestOldBudgetNeverOverspends(t *testing.T) {
	t.Parallel()
	l := Looks{Alpha: 0.01, Share: 0.5, Spent: []Look{{Alpha: 0.005}, {Alpha: 0.0025}, {Alpha: 0.002}}}
	next, a, _, err := l.next(0.01, false, false)
	if err != nil || a > 0.0005+1e-15 || next.SpentAlpha() > 0.01+1e-15 {
		t.Errorf("α %g, spent %g, err %v", a, next.SpentAlpha(), err)
	}
	if _, _, _, err := (Looks{Alpha: 0.01, Share: 0.5, Spent: []Look{{Alpha: 0.01}}}).next(0.01, false, false); err == nil {
		t.Error("a spent old budget: want an error")
	}
}

// A re-judgement of evidence the plan has already looked at spends
// nothing: it decides at the last look's levels. A new plan after the last
// look starts with α of its own and says so.
func TestReuseAndNextRound(t *testing.T) {
	t.Parallel()
	l := Looks{Alpha: 0.005}
	var err error
	var a float64
	for range DefaultMaxLooks {
		if l, a, _, err = l.next(0.005, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if !l.Final() {
		t.Fatalf("after %d looks: not final: %+v", DefaultMaxLooks, l)
	}
	if _, _, _, err := l.next(0.005, false, false); err == nil {
		t.Error("a fifth look of a four-look plan was allowed")
	}
	again, ra, _, err := l.next(0.005, false, true)
	if err != nil || ra != a || len(again.Spent) != DefaultMaxLooks {
		t.Errorf("reuse: α %g (want the last look's %g), %d looks, err %v", ra, a, len(again.Spent), err)
	}
	n := l.NextRound()
	if n.Rounds() != 2 || len(n.Spent) != 0 || n.Alpha != l.Alpha {
		t.Errorf("next round %+v", n)
	}
	first, fa, _, err := n.next(0.005, false, false)
	if err != nil || fa != AlphaForLook(PlanPocock, 0.005, 1, DefaultMaxLooks) || first.Rounds() != 2 {
		t.Errorf("round 2's first look: α %g, %+v, %v", fa, first, err)
	}
	rep := &Report{Confidence: 0.995, Looks: first, Alpha: fa}
	if ev := rep.Evidence(); !strings.Contains(ev, "plan 2 (a retest after plan 1's last look; this pull request's false-alarm bound is now 1%)") {
		t.Errorf("evidence %q does not state the new plan and the bound", ev)
	}
}

// A tier's spending plan starts every fresh budget, and a budget already
// spent keeps the plan it started with.
func TestTierSpendingPlan(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	tr := tier(0.05, 3, "tpot_p99")
	tr.Spending = PlanOBrienFleming
	rep := compare(t, b, c, tr, Options{})
	if want := AlphaForLook(PlanOBrienFleming, 0.005, 1, DefaultMaxLooks); rep.Looks.Plan != PlanOBrienFleming || !near(rep.Alpha, want) {
		t.Fatalf("fresh budget on an O'Brien–Fleming tier: plan %q, α %g, want %g", rep.Looks.Plan, rep.Alpha, want)
	}
	started := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{}).Looks
	rep = compare(t, b, c, tr, Options{Looks: started})
	if want := AlphaForLook(PlanPocock, 0.005, 2, DefaultMaxLooks); rep.Looks.Plan != PlanPocock || !near(rep.Alpha, want) {
		t.Errorf("second look of a Pocock budget on a tier now O'Brien–Fleming: plan %q, α %g, want %g", rep.Looks.Plan, rep.Alpha, want)
	}
}
