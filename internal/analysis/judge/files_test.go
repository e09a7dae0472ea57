package judge

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Result files named in any order become the runs the server's store
// lists (job by job, in run order); files without places are paired in
// file order with a note; a mix, or a side on the wrong flag, is refused.
func TestPairFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var base, head []*result.Result
	jobs := append(gatetest.InterleavedJob(rng, 12, 4, 0, gatetest.Noise{RunSD: 0.01}), gatetest.InterleavedJob(rng, 9, 2, 0, gatetest.Noise{RunSD: 0.01})...)
	for i := len(jobs) - 1; i >= 0; i-- {
		if jobs[i].Side == gate.SideBase {
			base = append(base, jobs[i].Result)
		} else {
			head = append(head, jobs[i].Result)
		}
	}
	il, err := PairFiles(base, head)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"job 9: B H H B", "job 12: B H H B B H H B"}; !slices.Equal(il.Orders, want) {
		t.Errorf("orders %q, want %q", il.Orders, want)
	}
	for i := 1; i < len(il.Runs); i++ {
		a, b := il.Runs[i-1], il.Runs[i]
		if a.Session == b.Session && a.Seq >= b.Seq {
			t.Errorf("runs %d and %d out of run order: %+v %+v", i-1, i, a, b)
		}
	}
	if got := HistoryFiles(append(base, head...)); len(got) != 2 || got[0][0].Session != "12" {
		t.Errorf("history jobs %d, first %q; want 2, the newest (12) first", len(got), got[0][0].Session)
	}

	plain := fixture(t, "vllm-candidate-1.json", "vllm-candidate-2.json")
	il, err = PairFiles(plain, plain)
	if err != nil || len(il.Pairs) != 2 || len(il.PairNotes) != 1 || !strings.Contains(il.PairNotes[0], "file order") {
		t.Errorf("unplaced files: %+v, %v; want 2 pairs in file order with a note", il, err)
	}
	for _, tc := range []struct {
		name       string
		base, head []*result.Result
		want       string
	}{
		{"unequal", plain, plain[:1], "as many baseline runs as candidate runs"},
		{"mixed", base, plain, "carry their place"},
		{"head as base", head, base, "baseline run 1 is a head run"},
	} {
		if _, err := PairFiles(tc.base, tc.head); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
