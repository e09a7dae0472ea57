package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
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
	skew   atomic.Int64 // how far the dashboard's clock is ahead, in ns
}

// advance moves the dashboard's clock on.
func (f *fixture) advance(d time.Duration) { f.skew.Add(int64(d)) }

var end = time.Date(2025, 4, 30, 0, 0, 0, 0, time.UTC)

func newFixture(t testing.TB) *fixture { t.Helper(); return newFixtureWith(t, false) }

// vault is a second private repository, seeded only for the sign-in tests:
// one person may read it, another may not.
const vault = "acme/vault"

// newFixtureWith seeds the history; with signIn the dashboard signs people
// in through the fake GitHub's OAuth client, at its own address, and
// vault exists too.
func newFixtureWith(t testing.TB, signIn bool) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st}
	repos := []string{repo, private}
	if signIn {
		repos = append(repos, vault)
	}
	for _, r := range repos {
		nights, err := history.Seed(ctx, st, history.Spec{Repo: r, Cells: []string{"c=1", "c=64"}, Days: days, StepDay: stepDay, Step: 0.10,
			Noise: 0.01, Requests: 80, Runs: 3, ReleaseDay: 10, ReleaseTag: "v0.2.0", InstallationID: githubtest.InstallationID, Seed: 5, End: end})
		if err != nil {
			t.Fatal(err)
		}
		if r == repo {
			f.nights = nights
		}
	}
	f.gh = ghtest.New(t)
	f.signer = web.NewSigner([]byte("test key"), time.Hour, nil)
	o := web.Options{Store: st, Visibility: web.StaticVisibility{repo: true}, Signer: f.signer,
		PublicURL: "https://perfgate.example", Log: zerolog.Nop(), Now: func() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }}
	// The server's address is known before it starts: sign-in needs it as
	// the public URL GitHub sends the browser back to.
	f.srv = httptest.NewUnstartedServer(nil)
	if signIn {
		o.PublicURL = "http://" + f.srv.Listener.Addr().String()
		o.SignIn = &web.SignIn{ClientID: githubtest.ClientID, ClientSecret: githubtest.ClientSecret, WebURL: f.gh.URL, APIURL: f.gh.URL + "/"}
		for _, r := range []string{private, vault} {
			f.gh.SetPrivate(r, true)
		}
	}
	f.h, err = web.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = f.h
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	cc, err := githubapp.NewDefaultCachingClientCreator(f.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drift.New(drift.Options{Store: st, Clients: cc, Links: f.h, Log: zerolog.Nop()}).Run(ctx); err != nil {
		t.Fatal(err)
	}
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
