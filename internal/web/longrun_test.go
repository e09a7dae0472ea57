package web_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/perfgate/perfgate/internal/capacity"
	"github.com/perfgate/perfgate/internal/store"
)

// capacitySHA is the commit of the capacity check capacityCheck stores.
const capacitySHA = "c0ffee0000000000000000000000000000000031"

// capacityCheck stores a judged `perfgate / capacity` check whose verdict
// keeps the sweeps measured against the sim (internal/capacity/testdata),
// as dispatch writes it, and returns its commit.
func capacityCheck(t *testing.T, f *fixture) string {
	t.Helper()
	var base, head capacity.Sweep
	for path, s := range map[string]*capacity.Sweep{"../capacity/testdata/base.json": &base, "../capacity/testdata/head.json": &head} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, s); err != nil {
			t.Fatal(err)
		}
	}
	c := capacity.Compare([]capacity.Knee{base.Knee()}, []capacity.Knee{head.Knee()}, 0.1)
	verdict, err := json.Marshal(map[string]any{"long_run": map[string]any{
		"headline": "sustainable rate 18 → 7 req/s (−60%)", "markdown": "| offered req/s | base served req/s |\\n|---:|---:|\\n",
		"capacity": c, "base_sweep": &base, "head_sweep": &head,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.ApplyCheck(context.Background(), store.CheckChange{Repo: repo, HeadSHA: capacitySHA, Tier: "capacity", PRNumber: 31,
		State: "warned", Verdict: verdict}); err != nil {
		t.Fatal(err)
	}
	return capacitySHA
}
