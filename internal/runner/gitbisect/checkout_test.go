package gitbisect

import (
	"context"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

// TestBisectBad: the bad end is the first commit git bisect marked bad —
// refs/bisect/bad moves to every later bad step, which would make each step
// measure a different (and nearer) bad end.
func TestBisectBad(t *testing.T) {
	repo := ghtest.NewGitRepo(t)
	var shas []string
	for i := range 6 {
		shas = append(shas, repo.Commit("change", map[string]string{"NOTES": string(rune('a' + i))}))
	}
	t.Chdir(repo.Dir)
	ctx := context.Background()
	if got := bisectBad(ctx); got != "" {
		t.Fatalf("outside a bisect: %q, want none", got)
	}
	repo.Git("bisect", "start", shas[5], shas[0])
	repo.Git("bisect", "bad", shas[3])
	if got := bisectBad(ctx); got != shas[5] {
		t.Errorf("bad end %.7s, want the first marked bad %.7s (refs/bisect/bad is %.7s)", got, shas[5], shas[3])
	}
	repo.Git("bisect", "reset")
}
