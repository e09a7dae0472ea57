package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	perfgate "github.com/perfgate/perfgate"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/setup"
	"github.com/perfgate/perfgate/internal/github/setup/setuptest"
)

type harness struct {
	gh        *githubtest.Server
	flow      *setup.Flow
	srv       *httptest.Server
	dir       string
	mu        sync.Mutex
	completed []setup.Credentials
}

func newHarness(t *testing.T) *harness { return newHarnessAt(t, "", "", nil) }

// newHarnessAt serves the flow with its public URL under prefix (a proxy
// that strips it), its data in dir (a temporary one when empty), and opts
// edited by edit.
func newHarnessAt(t *testing.T, prefix, dir string, edit func(*setup.Options)) *harness {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	h := &harness{gh: ghtest.New(t), dir: dir}
	m, err := setup.ParseManifest(perfgate.AppManifest)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.srv = httptest.NewServer(http.StripPrefix(prefix, mux))
	t.Cleanup(h.srv.Close)
	opts := setup.Options{
		Manifest: m, PublicURL: h.srv.URL + prefix, WebURL: h.gh.URL, APIURL: h.gh.URL + "/", DataDir: h.dir,
		Log: zerolog.Nop(),
		Complete: func(ctx context.Context, c setup.Credentials) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.completed = append(h.completed, c)
			return nil
		},
	}
	if edit != nil {
		edit(&opts)
	}
	h.flow, err = setup.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/setup", h.flow.Handler())
	mux.Handle("/setup/", h.flow.Handler())
	return h
}

func TestFlowCreatesAppForOrganisationAndUser(t *testing.T) {
	for _, org := range []string{"acme-gpu", ""} {
		t.Run("org="+org, func(t *testing.T) {
			h := newHarness(t)
			page := setuptest.Create(t, setuptest.Browser(t), h.flow.StartURL(), org)
			if page.Status != http.StatusOK || !strings.Contains(page.Body, "GitHub App created") {
				t.Fatalf("final page %d:\n%s", page.Status, page.Body)
			}
			apps := h.gh.ManifestApps()
			if len(apps) != 1 {
				t.Fatalf("GitHub made %d apps", len(apps))
			}
			app := apps[0]
			wantOwner := org
			if org == "" {
				wantOwner = githubtest.SignedInUser
			}
			if app.Owner != wantOwner || !app.Converted {
				t.Errorf("app owner %q converted %v, want %q converted", app.Owner, app.Converted, wantOwner)
			}
			// The manifest GitHub received points at this server and asks
			// for the permissions in app.yml, pull_requests read only.
			if got := app.Manifest["hook_attributes"].(map[string]any)["url"]; got != h.srv.URL+"/api/github/hook" {
				t.Errorf("hook url %v", got)
			}
			if got := app.Manifest["redirect_url"]; got != h.srv.URL+"/setup/redirect" {
				t.Errorf("redirect_url %v", got)
			}
			if got := app.Manifest["default_permissions"].(map[string]any)["pull_requests"]; got != "read" {
				t.Errorf("pull_requests permission %v", got)
			}
			// Stored: 0600 files that Load reads back, the same as Complete got.
			c, err := setup.Load(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			if c.AppID != app.ID || c.WebhookSecret != app.WebhookSecret || !strings.HasPrefix(c.Slug, "perfgate-") || c.Name != app.Manifest["name"] || c.Owner != wantOwner {
				t.Errorf("stored %+v, app %+v", c, app)
			}
			// The OAuth client (sign in with GitHub) is kept as well.
			if !strings.HasPrefix(c.ClientID, "Iv1.") || c.ClientSecret == "" {
				t.Errorf("stored OAuth client %q (secret %d characters)", c.ClientID, len(c.ClientSecret))
			}
			for _, f := range []string{setup.AppFile, setup.KeyFile, setup.ClientSecretFile} {
				st, err := os.Stat(filepath.Join(h.dir, f))
				if err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v mode %v, want 0600", f, err, st.Mode().Perm())
				}
			}
			if len(h.completed) != 1 || h.completed[0].AppID != app.ID || h.completed[0].PrivateKeyPEM == "" {
				t.Errorf("Complete got %+v", h.completed)
			}
			// Once done, /setup says so instead of offering a second app.
			again := setuptest.Get(t, setuptest.Browser(t), h.srv.URL+"/setup")
			if !strings.Contains(again.Body, "perfgate is set up") || strings.Contains(again.Body, "manifest") {
				t.Errorf("setup page after completion:\n%s", again.Body)
			}
		})
	}
}

func TestFlowRefusals(t *testing.T) {
	h := newHarness(t)
	stranger := setuptest.Browser(t)
	// No key: no form.
	if p := setuptest.Get(t, stranger, h.srv.URL+"/setup"); p.Status != http.StatusForbidden || strings.Contains(p.Body, "manifest") {
		t.Errorf("setup without the key: %d\n%s", p.Status, p.Body)
	}
	if p := setuptest.Get(t, stranger, h.srv.URL+"/setup?key=guess"); p.Status != http.StatusForbidden {
		t.Errorf("wrong key: %d", p.Status)
	}
	if p := setuptest.Get(t, stranger, h.srv.URL+"/setup?org=bad--name"); p.Status != http.StatusForbidden {
		t.Errorf("no cookie: %d", p.Status)
	}

	admin := setuptest.Browser(t)
	p := setuptest.Get(t, admin, h.flow.StartURL())
	if strings.Contains(p.URL.String(), "key=") {
		t.Errorf("the key stays in the address bar: %s", p.URL)
	}
	if p := setuptest.Get(t, admin, h.srv.URL+"/setup?org=bad--name"); p.Status != http.StatusBadRequest {
		t.Errorf("bad org name: %d", p.Status)
	}
	// The form's POST, too, wants the key's cookie and a valid owner and name.
	if p := setuptest.Submit(t, stranger, p, "create", nil); p.Status != http.StatusForbidden {
		t.Errorf("create without cookie: %d", p.Status)
	}
	for _, bad := range []url.Values{{"org": {"bad--name"}}, {"name": {strings.Repeat("x", 35)}}, {"name": {"tab\there"}}} {
		if p := setuptest.Submit(t, admin, p, "create", bad); p.Status != http.StatusBadRequest {
			t.Errorf("create with %v: %d", bad, p.Status)
		}
	}
	confirm := setuptest.Submit(t, admin, p, "create", url.Values{"org": {""}})
	action, fields, err := setuptest.Form(confirm.Body, "github")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(action)
	state := u.Query().Get("state")
	if u.Path != "/settings/apps/new" || len(state) < 32 {
		t.Errorf("form action %s", action)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(fields.Get("manifest")), &m); err != nil || !strings.HasPrefix(m["name"].(string), "perfgate-") {
		t.Errorf("manifest field: %v %v", err, m)
	}

	// A forged redirect: right cookie, unknown state.
	if p := setuptest.Get(t, admin, h.srv.URL+"/setup/redirect?code=x&state=forged"); p.Status != http.StatusBadRequest {
		t.Errorf("forged state: %d\n%s", p.Status, p.Body)
	}
	// A redirect to a browser that never opened the setup link.
	if p := setuptest.Get(t, stranger, h.srv.URL+"/setup/redirect?code=x&state="+state); p.Status != http.StatusForbidden {
		t.Errorf("redirect without cookie: %d", p.Status)
	}
	// A code past its hour: GitHub answers 404 and the page says to start again.
	noFollow := *admin
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(action, fields)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.gh.ExpireManifestCodes()
	p = setuptest.Get(t, admin, resp.Header.Get("Location"))
	if p.Status != http.StatusBadGateway || !strings.Contains(p.Body, "start again") {
		t.Errorf("expired code: %d\n%s", p.Status, p.Body)
	}
	// The state was used once and is gone.
	if p := setuptest.Get(t, admin, resp.Header.Get("Location")); p.Status != http.StatusBadRequest {
		t.Errorf("state reused: %d", p.Status)
	}
	if _, err := setup.Load(h.dir); !errors.Is(err, setup.ErrNotConfigured) {
		t.Errorf("credentials after failures: %v", err)
	}
	if len(h.completed) != 0 {
		t.Errorf("Complete called %d times", len(h.completed))
	}
}
