package gate

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Runs whose tokens reached the client in bursts (the client's check
// marked their TPOT and ITL delivery-bound) are named on the check, and
// kept: unlike a client-bound run, their other figures stand.
func TestDeliveryBoundRunsNoted(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	b, h := runs(tpotLevels, 0.01, 0), runs(tpotLevels, 0.01, 0)
	for i, r := range h {
		r.Perfgate.Client = &result.ClientCheck{Delivery: &result.Delivery{Gaps: 248, BurstGapMS: 0.1, BurstShare: 0.2, MedianITLMS: 3.1}}
		if i < 3 {
			r.Perfgate.Client.Delivery = &result.Delivery{Gaps: 248, BurstGapMS: 0.1, BurstShare: 0.74 + 0.1*float64(i), DeliveryBound: true, Reason: "bursts"}
		}
	}
	for name, cmp := range map[string]func() (*Report, error){
		"paired": func() (*Report, error) { return ComparePaired(pairsOf(b, h), tr, Options{}) },
		"stored": func() (*Report, error) { return Compare(b, h, tr, Options{}) },
	} {
		rep, err := cmp()
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Join(rep.Notes, " ")
		if !strings.Contains(n, "delivery-bound in 3 of 10 runs") || !strings.Contains(n, "94% of inter-token gaps under 0.1 ms") {
			t.Errorf("%s: notes %q", name, rep.Notes)
		}
		if len(rep.ExcludedRuns) != 0 {
			t.Errorf("%s: delivery-bound runs excluded: %q", name, rep.ExcludedRuns)
		}
	}
	if rep := compare(t, b, runs(tpotLevels, 0.01, 0), tr, Options{}); strings.Contains(strings.Join(rep.Notes, " "), "delivery-bound") {
		t.Errorf("runs without bursts noted as delivery-bound: %q", rep.Notes)
	}
}
