package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/perfgate/perfgate/internal/runner/source"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// An interleaved job reads the workload's dataset from the base commit for
// both sides: a pull request that shortens its own prompts file measures
// the base's prompts anyway.
func TestDatasetFromBaseForBothSides(t *testing.T) {
	t.Parallel()
	base := promptsCheckout(t, agentapi.SideBase, `{"prompt":"a long prompt from the base branch"}`+"\n")
	head := promptsCheckout(t, agentapi.SideHead, `{"prompt":"x"}`+"\n")
	sides := map[string]*side{agentapi.SideBase: base, agentapi.SideHead: head}
	plan := agentapi.Plan{Workload: agentapi.Workload{Dataset: "jsonl", DatasetPath: "bench/prompts.jsonl"}}
	a := &Agent{}
	c := &agentapi.ClaimResponse{JobID: 1}
	want, err := filepath.EvalSymlinks(filepath.Join(base.checkout.Dir, "bench", "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*side{base, head} {
		if got := a.benchOptions(plan, "http://x", c, datasetSide(sides, s)).DatasetPath; got != want {
			t.Errorf("%s side reads %s, want the base's %s", s.name, got, want)
		}
	}
	// A job of one commit reads its own.
	one := map[string]*side{"": head}
	if got := a.benchOptions(plan, "http://x", c, datasetSide(one, head)).DatasetPath; filepath.Dir(filepath.Dir(got)) != mustEval(t, head.checkout.Dir) {
		t.Errorf("one-commit job reads %s", got)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A job that measures the pull request's head alone (a quick screen
// against a stored baseline) reads the dataset from the plan's dataset
// commit, the pull request's base, not from the head it measures.
func TestDatasetFromBaseForHeadOnlyJobs(t *testing.T) {
	t.Parallel()
	head := promptsCheckout(t, "", `{"prompt":"x"}`+"\n")
	dataset := promptsCheckout(t, sideDataset, `{"prompt":"a long prompt from the base branch"}`+"\n")
	sides := map[string]*side{"": head, sideDataset: dataset}
	plan := agentapi.Plan{Workload: agentapi.Workload{Dataset: "jsonl", DatasetPath: "bench/prompts.jsonl"}}
	got := (&Agent{}).benchOptions(plan, "http://x", &agentapi.ClaimResponse{JobID: 1}, datasetSide(sides, head)).DatasetPath
	if want := mustEval(t, filepath.Join(dataset.checkout.Dir, "bench", "prompts.jsonl")); got != want {
		t.Errorf("head-only job reads %s, want the base's %s", got, want)
	}
}

// promptsCheckout is a side whose checkout holds bench/prompts.jsonl.
func promptsCheckout(t *testing.T, name, prompts string) *side {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench", "prompts.jsonl"), []byte(prompts), 0o644); err != nil {
		t.Fatal(err)
	}
	return &side{name: name, checkout: &source.Checkout{Dir: dir}}
}
