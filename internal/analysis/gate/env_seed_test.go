package gate

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// seeded gives the runs load seeds 1, 2, 3… in turn and the dataset hash
// each seed draws (hash names the dataset: a changed dataset is another
// name).
func seeded(rs []*result.Result, hash string, seeds ...int64) []*result.Result {
	for i, r := range rs {
		s := seeds[i%len(seeds)]
		r.Perfgate.Load.Seed = s
		r.Perfgate.DatasetHash = hash + ":" + string(rune('a'+s))
	}
	return rs
}

// Repeats run with seeds 1, 2, 3 on each side change the prompts run by
// run, not the engine: a 1.2× slowdown with three runs a side is judged,
// not sent back inconclusive as an environment mismatch. A dataset that
// differs for one seed is still caught, and the mismatch names the field
// and the seed.
func TestEnvironmentIgnoresPerRunSeeds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		base      []int64
		cand      []int64
		candHash  string
		verdict   Verdict
		mismatch  []Mismatch
		noteMatch string
	}{
		{"same seeds, 1.2× slower", []int64{1, 2, 3}, []int64{1, 2, 3}, "ds", Regression, nil, ""},
		{"same seeds, another order", []int64{1, 2, 3}, []int64{3, 1, 2}, "ds", Regression, nil, ""},
		{"seeds on one side only", []int64{1, 2, 3}, []int64{4, 5, 6}, "ds", Regression, nil, "share no load seed"},
		{"dataset changed", []int64{1, 2, 3}, []int64{1, 2, 3}, "other", Inconclusive, []Mismatch{
			{"dataset_hash (seed 1)", "ds:b", "other:b"}, {"dataset_hash (seed 2)", "ds:c", "other:c"}, {"dataset_hash (seed 3)", "ds:d", "other:d"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := seeded(runs(lat, 0.01, 0)[:3], "ds", tc.base...)
			c := seeded(runs(lat, 0.01, math.Log(1.2), "p99_tpot_ms")[:3], tc.candHash, tc.cand...)
			rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
			if rep.Verdict != tc.verdict || !reflect.DeepEqual(rep.Mismatches, tc.mismatch) {
				t.Errorf("verdict %s mismatches %+v; want %s and %+v; notes %q", rep.Verdict, rep.Mismatches, tc.verdict, tc.mismatch, rep.Notes)
			}
			if tc.noteMatch != "" && !strings.Contains(strings.Join(rep.Notes, "\n"), tc.noteMatch) {
				t.Errorf("notes %q, want one saying %q", rep.Notes, tc.noteMatch)
			}
		})
	}
}

// Within one side, one seed must always draw the same prompts: a side
// whose seed 2 ran two datasets disagrees with itself.
func TestPerSeedFieldWithinSide(t *testing.T) {
	t.Parallel()
	b := seeded(runs(lat, 0.01, 0)[:4], "ds", 1, 2, 3)
	c := seeded(runs(lat, 0.01, 0)[:4], "ds", 1, 2, 3)
	c[3].Perfgate.Load.Seed = 2 // seed 2 again, with seed 1's prompts
	mm, _ := checkEnvironment(b, c, perfgateFields)
	want := []Mismatch{{"dataset_hash (seed 2)", "ds:c", "ds:b, ds:c"}}
	if !reflect.DeepEqual(mm, want) {
		t.Errorf("mismatches %+v, want %+v", mm, want)
	}
}
