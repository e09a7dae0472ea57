package agentapi

import (
	"slices"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// A pull request's head-only plan names its base as the dataset's commit,
// and the agent may fetch it; an interleaved plan reads the dataset from
// its base side; a plan without a relative dataset path names none.
func TestDatasetSHA(t *testing.T) {
	t.Parallel()
	const head, base = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	cfgWith := func(yml string) *config.Config {
		cfg, err := config.Parse(config.DefaultPath, []byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	jsonl := cfgWith("workload: {dataset: jsonl, dataset_path: bench/prompts.jsonl}\n")
	tests := []struct {
		name     string
		cfg      *config.Config
		tier     string
		c        Commits
		wantSHA  string
		wantCits []string
	}{
		{"quick, head alone", jsonl, "quick", Commits{Repo: "o/r", Head: head, Base: base}, base, []string{head, base}},
		{"merge, interleaved", jsonl, "merge", Commits{Repo: "o/r", Head: head, Base: base}, "", []string{head, base}},
		{"one commit", jsonl, "quick", Commits{Repo: "o/r", Head: head}, "", []string{head}},
		{"random prompts", cfgWith("{}\n"), "quick", Commits{Repo: "o/r", Head: head, Base: base}, "", []string{head}},
	}
	for _, tt := range tests {
		p, err := PlanAt(tt.cfg, tt.tier, tt.c)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if p.Workload.DatasetSHA != tt.wantSHA {
			t.Errorf("%s: dataset_sha %q, want %q", tt.name, p.Workload.DatasetSHA, tt.wantSHA)
		}
		if got := p.Commits(); !slices.Equal(got, tt.wantCits) {
			t.Errorf("%s: the agent may fetch %v, want %v", tt.name, got, tt.wantCits)
		}
	}
	bad := Plan{Version: PlanVersion, Tier: "quick", HeadSHA: head, Workload: Workload{NumPrompts: 1, DatasetSHA: "HEAD~1"}}
	if err := bad.Validate(); err == nil {
		t.Error("a dataset_sha that is not a commit id validated")
	}
}
