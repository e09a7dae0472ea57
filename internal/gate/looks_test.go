package gate

import (
	"encoding/json"
	"math"
	"testing"
)

// Each look spends half of what is left: α/2, α/4, α/8, …, never more
// than α in all.
func TestAlphaForLook(t *testing.T) {
	var spent []Look
	total := 0.0
	for i, want := range []float64{0.0025, 0.00125, 0.000625, 0.0003125} {
		a := AlphaForLook(0.005, DefaultShare, spent)
		if math.Abs(a-want) > 1e-15 {
			t.Errorf("look %d: α %g, want %g", i+1, a, want)
		}
		spent = append(spent, Look{Alpha: a})
		total += a
	}
	for range 100 {
		a := AlphaForLook(0.005, DefaultShare, spent)
		spent = append(spent, Look{Alpha: a})
		total += a
	}
	if total > 0.005 {
		t.Errorf("104 looks spent %g > α", total)
	}
	if a := AlphaForLook(0.005, 1, nil); a != 0.005 {
		t.Errorf("single look: %g", a)
	}
	if a := AlphaForLook(0.005, 0.5, []Look{{Alpha: 0.006}}); a != 0 {
		t.Errorf("overspent budget: %g", a)
	}
}

// Compare takes the budget and returns it with this look recorded; the
// budget round-trips through JSON, as a check row stores it.
func TestCompareSpendsTheBudget(t *testing.T) {
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	tr := tier(0.05, 3, "tpot_p99")
	rep := compare(t, b, c, tr, Options{})
	if !near(rep.Alpha, 0.0025) || rep.Look() != 1 || rep.Looks.Spent[0].CandidateRuns != 5 || rep.Looks.Spent[0].Verdict != Pass {
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
	rep = compare(t, b, append(c, runs(lat, 0.01, 0)...), tr, Options{Looks: stored})
	if !near(rep.Alpha, 0.00125) || rep.Look() != 2 || !near(rep.Looks.SpentAlpha(), 0.00375) || rep.Looks.Spent[1].CandidateRuns != 10 {
		t.Errorf("second look: α %g, budget %+v", rep.Alpha, rep.Looks)
	}
	// The budget's α is the first look's, whatever the tier says later.
	tr.Confidence = 0.999
	if rep := compare(t, b, c, tr, Options{Looks: stored}); !near(rep.Looks.Alpha, 0.005) || !near(rep.Alpha, 0.00125) {
		t.Errorf("stricter tier: budget α %g, look α %g", rep.Looks.Alpha, rep.Alpha)
	}
	if _, err := Compare(b, c, tr, Options{Looks: Looks{Alpha: 0.005, Share: 0.5, Spent: []Look{{Alpha: 0.005}}}}); err == nil {
		t.Error("a spent budget: want an error")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }
