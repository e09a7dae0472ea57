package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

// The server mounts the dashboard beside the webhook and agent API, asks
// GitHub which repositories are private, and gives each check run its own
// signed Details link.
func TestDashboardIsMounted(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
	gh.SetPrivate("acme/secret", true)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, repo := range []string{"acme/open", "acme/secret"} {
		if _, err := st.Enqueue(ctx, store.JobSpec{Repo: repo, Tier: "quick", HeadSHA: "abc"}); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewUnstartedServer(nil)
	srv, err := New(Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, PublicURL: "http://" + ts.Listener.Addr().String()}, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	defer ts.Close()
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(ts.URL + "/"); code != 200 || !strings.Contains(body, "/r/acme/open") || strings.Contains(body, "/r/acme/secret") {
		t.Errorf("GET / = %d; lists the public repository only?\n%.500s", code, body)
	}
	if code, _ := get(ts.URL + "/r/acme/secret"); code != 404 {
		t.Errorf("private repository without a link: %d, want 404", code)
	}
	if code, _ := get(ts.URL + "/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	link := srv.detailsLink("acme/secret", "abc", "quick")
	if !strings.HasPrefix(link, ts.URL+"/r/acme/secret/checks/abc/quick?access=") {
		t.Fatalf("details link = %s", link)
	}
	// The signed link opens the private repository (this check run has no
	// row yet: its page says so, rather than hiding the repository).
	if code, body := get(link); code != 404 || !strings.Contains(body, "has no quick check run") {
		t.Errorf("signed details link: %d %.300s", code, body)
	}
	if code, body := get(srv.Web().RepoURL("acme/secret")); code != 200 || !strings.Contains(body, "acme/secret") {
		t.Errorf("signed repository link: %d %.300s", code, body)
	}
}
