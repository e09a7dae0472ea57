package tarball_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/tarball"
	"github.com/perfgate/perfgate/internal/runner/source"
)

// TestGitHubTarball: the fetcher asks the API with the installation token,
// follows the redirect without it, and streams the real repository's
// archive of the exact commit; an unknown commit is ErrNotFound.
func TestGitHubTarball(t *testing.T) {
	r := ghtest.NewGitRepo(t)
	sha := r.Commit("one", map[string]string{"inference_engine/sim.yaml": "slowdown: 1.2\n"})
	gh := ghtest.New(t)
	gh.SetGitRepo("o/r", r.Dir)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	g := tarball.NewGitHub(cc)
	ctx := context.Background()
	body, err := g.Tarball(ctx, githubtest.InstallationID, "o/r", sha)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := source.Unpack(body, t.TempDir(), source.Limits{})
	body.Close()
	if err != nil || tree.Commit != sha || tree.Files != 2 {
		t.Fatalf("unpacked %+v, %v; want commit %s with 2 entries", tree, err, sha)
	}
	api := gh.RequestsTo("GET", "/repos/o/r/tarball/"+sha)
	if len(api) != 1 || !strings.HasPrefix(api[0].Header.Get("Authorization"), "token ghs_") || api[0].Status != 302 {
		t.Errorf("tarball API calls: %+v, want one with the installation token answered 302", api)
	}
	for _, rq := range gh.Requests() {
		if strings.HasPrefix(rq.Path, "/_codeload/") && rq.Header.Get("Authorization") != "" {
			t.Errorf("the download carried the installation token: %s", rq.Header.Get("Authorization"))
		}
	}
	if _, err := g.Tarball(ctx, githubtest.InstallationID, "o/r", strings.Repeat("0", 40)); !errors.Is(err, tarball.ErrNotFound) {
		t.Errorf("unknown commit: %v, want ErrNotFound", err)
	}
	gh.FailNext("GET", "/repos/o/r/tarball/"+sha, 1, 502, nil)
	if rc, err := g.Tarball(ctx, githubtest.InstallationID, "o/r", sha); err == nil {
		io.Copy(io.Discard, rc)
		rc.Close()
		t.Error("a 502 from GitHub was not an error")
	}
}
