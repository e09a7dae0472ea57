package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
)

const (
	repo    = "acme/inference"
	private = "acme/secret"
	days    = 30
	stepDay = 20
)

// fixture is a dashboard over a seeded history: 30 nights of two matrix
// cells with a 10% slowdown from night 20, a release on night 10, and the
// change points the nightly pass found in it.
type fixture struct {
	st     store.Store
	h      *web.Handler
	srv    *httptest.Server
	signer *web.Signer
	nights []history.Night
	gh     *githubtest.Server
}

var end = time.Date(2025, 4, 30, 0, 0, 0, 0, time.UTC)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st}
	for _, r := range []string{repo, private} {
		nights, err := history.Seed(ctx, st, history.Spec{Repo: r, Cells: []string{"c=1", "c=64"}, Days: days, StepDay: stepDay, Step: 0.10,
			Noise: 0.01, Requests: 80, Runs: 3, ReleaseDay: 10, ReleaseTag: "v0.2.0", InstallationID: githubtest.InstallationID, Seed: 5, End: end})
		if err != nil {
			t.Fatal(err)
		}
		if r == repo {
			f.nights = nights
		}
	}
	f.signer = web.NewSigner([]byte("test key"), time.Hour, nil)
	f.h, err = web.New(web.Options{Store: st, Visibility: web.StaticVisibility{repo: true}, Signer: f.signer,
		PublicURL: "https://perfgate.example", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	f.gh = ghtest.New(t)
	cc, err := githubapp.NewDefaultCachingClientCreator(f.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drift.New(drift.Options{Store: st, Clients: cc, Links: f.h, Log: zerolog.Nop()}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

func get(t testing.TB, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}
