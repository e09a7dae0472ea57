package bisect_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

func TestGitHubLister(t *testing.T) {
	t.Parallel()
	repo := ghtest.NewGitRepo(t)
	good := repo.Commit("initial", map[string]string{"inference_engine/knob": "1"})
	want := []string{good}
	want = append(want, repo.Commits(102, func(i int) (string, map[string]string) {
		return fmt.Sprintf("change %d (#%d)", i+1, i+1), map[string]string{"inference_engine/knob": fmt.Sprint(i + 1)}
	})...)
	// A merged branch: the bisect follows main's first parents, so the
	// branch's own commits are not in the list, the merge commit is.
	repo.Git("checkout", "--quiet", "-b", "feature")
	branchOnly := repo.Commit("feature work", map[string]string{"model/x": "1"})
	repo.Git("checkout", "--quiet", "main")
	want = append(want, repo.Commit("main meanwhile (#103)", map[string]string{"inference_engine/knob": "103"}))
	repo.Git("merge", "--quiet", "--no-ff", "-m", "Merge pull request #104 from acme/feature", "feature")
	merge := repo.Git("rev-parse", "HEAD")
	want = append(want, merge)
	bad := repo.Commit("after the merge (#105)", map[string]string{"inference_engine/knob": "105"})
	want = append(want, bad)

	gh := ghtest.New(t)
	gh.SetGitRepo("acme/llm", repo.Dir)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	l := bisect.GitHubLister{Client: client}
	ctx := context.Background()

	got, err := l.ListCommits(ctx, "acme/llm", good[:10], "main")
	if err != nil {
		t.Fatal(err)
	}
	var shas []string
	for _, c := range got {
		shas = append(shas, c.SHA)
		if c.SHA == branchOnly {
			t.Errorf("the branch's own commit %s is in the first-parent list", c.SHA[:7])
		}
	}
	if strings.Join(shas, " ") != strings.Join(want, " ") {
		t.Fatalf("listed %d commits, want %d in first-parent order", len(shas), len(want))
	}
	if got[0].Title != "initial" || got[5].Title != "change 5 (#5)" || got[5].PR != 5 {
		t.Errorf("commit fields: %+v %+v", got[0], got[5])
	}
	if c := got[len(got)-2]; c.PR != 104 || c.Title != "Merge pull request #104 from acme/feature" || !strings.HasSuffix(c.URL, "/acme/llm/commit/"+merge) {
		t.Errorf("merge commit: %+v, want %s", c, merge)
	}
	// 104 commits after the good one at 100 a page: two pages.
	var pages []string
	for _, r := range gh.Requests() {
		if strings.HasPrefix(r.Path, "/repos/acme/llm/compare/") {
			pages = append(pages, r.Query.Get("page"))
		}
	}
	if strings.Join(pages, ",") != ",2" {
		t.Errorf("compare pages requested %q, want the first and page 2", pages)
	}

	// What a person can get wrong, each answered with what to do.
	repo.Git("checkout", "--quiet", "-b", "side", want[3])
	side := repo.Commit("elsewhere", map[string]string{"other": "1"})
	for _, tc := range []struct{ good, bad, want string }{
		{bad, good, "swap them"},
		{bad, bad, "same commit"},
		{side, bad, "not an ancestor"},
		{"0123456789abcdef0123456789abcdef01234567", bad, "check both are pushed"},
		{good, "no-such-branch", "check both are pushed"},
	} {
		if _, err := l.ListCommits(ctx, "acme/llm", tc.good, tc.bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ListCommits(%.7s, %.7s) = %v, want an error saying %q", tc.good, tc.bad, err, tc.want)
		}
	}
	if _, err := l.ListCommits(ctx, "acme", good, bad); err == nil {
		t.Error("a repository without an owner was accepted")
	}
}
