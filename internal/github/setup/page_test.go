package setup_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/setup"
	"github.com/perfgate/perfgate/internal/github/setup/setuptest"
)

// The page's one form carries the owner and the name; the server answers
// with a confirmation that names both, and its form goes to that owner's
// "new GitHub App" page with that name in the manifest.
func TestConfirmationNamesOwnerAndName(t *testing.T) {
	for _, tt := range []struct {
		name     string
		form     url.Values
		wantPath string
		wantName string // "" is the suggested one
		wantText []string
	}{
		{"organisation", url.Values{"org": {"acme-gpu"}}, "/organizations/acme-gpu/settings/apps/new", "",
			[]string{"for the organisation acme-gpu", "the organisation acme-gpu</strong>"}},
		{"personal account", url.Values{"org": {""}}, "/settings/apps/new", "",
			[]string{"on your personal account", "your personal account</strong>"}},
		{"renamed", url.Values{"org": {"acme-gpu"}, "name": {"perf gate (acme)"}}, "/organizations/acme-gpu/settings/apps/new", "perf gate (acme)",
			[]string{"Create perf gate (acme) for the organisation acme-gpu"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			b := setuptest.Browser(t)
			page := setuptest.Get(t, b, h.flow.StartURL())
			_, fields, err := setuptest.Form(page.Body, "create")
			if err != nil {
				t.Fatal(err)
			}
			suggested := fields.Get("name")
			if !strings.HasPrefix(suggested, "perfgate-") || len(suggested) != len("perfgate-")+6 {
				t.Errorf("suggested name %q, want perfgate- and six characters", suggested)
			}
			confirm := setuptest.Submit(t, b, page, "create", tt.form)
			if confirm.Status != http.StatusOK {
				t.Fatalf("confirmation: %d\n%s", confirm.Status, confirm.Body)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(confirm.Body, w) {
					t.Errorf("confirmation lacks %q:\n%s", w, confirm.Body)
				}
			}
			action, fields, err := setuptest.Form(confirm.Body, "github")
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(action)
			var m map[string]any
			if err := json.Unmarshal([]byte(fields.Get("manifest")), &m); err != nil {
				t.Fatal(err)
			}
			want := tt.wantName
			if want == "" {
				want = suggested
			}
			if u.Path != tt.wantPath || m["name"] != want {
				t.Errorf("form goes to %s with name %v; want %s with %q", u.Path, m["name"], tt.wantPath, want)
			}
		})
	}
}

// The setup link survives a restart until the app exists, then goes.
func TestSetupKeyStableUntilDone(t *testing.T) {
	dir := t.TempDir()
	first := newHarnessAt(t, "", dir, nil)
	second := newHarnessAt(t, "", dir, nil) // the server restarted
	key := func(h *harness) string {
		u, _ := url.Parse(h.flow.StartURL())
		return u.Query().Get("key")
	}
	if key(first) != key(second) || len(key(first)) != 32 {
		t.Fatalf("keys %q and %q: want one key kept across restarts", key(first), key(second))
	}
	if st, err := os.Stat(filepath.Join(dir, setup.SetupKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st)
	}
	// The old link opens the restarted server's page.
	if p := setuptest.Get(t, setuptest.Browser(t), strings.Replace(first.flow.StartURL(), first.srv.URL, second.srv.URL, 1)); p.Status != http.StatusOK {
		t.Errorf("the link after a restart: %d", p.Status)
	}
	if p := setuptest.Create(t, setuptest.Browser(t), second.flow.StartURL(), ""); !strings.Contains(p.Body, "GitHub App created") {
		t.Fatalf("setup: %d\n%s", p.Status, p.Body)
	}
	if _, err := os.Stat(filepath.Join(dir, setup.SetupKeyFile)); !os.IsNotExist(err) {
		t.Errorf("the key file outlives the setup: %v", err)
	}
	if third := newHarnessAt(t, "", dir, nil); key(third) == key(first) {
		t.Error("a new setup reuses the old link")
	}
}

// Behind a proxy that serves perfgate under a path, every link, redirect,
// cookie and manifest URL carries the path.
func TestSetupUnderPathPrefix(t *testing.T) {
	h := newHarnessAt(t, "/tools/perfgate", "", nil)
	base := h.srv.URL + "/tools/perfgate"
	if got := h.flow.StartURL(); !strings.HasPrefix(got, base+"/setup?key=") {
		t.Errorf("start URL %s", got)
	}
	noFollow := setuptest.Browser(t)
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get(h.flow.StartURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if loc := resp.Header.Get("Location"); loc != "/tools/perfgate/setup" || len(cookies) != 1 || cookies[0].Path != "/tools/perfgate/setup" {
		t.Errorf("after the key: Location %q, cookies %v", loc, cookies)
	}
	b := setuptest.Browser(t)
	page := setuptest.Get(t, b, h.flow.StartURL())
	if action, _, err := setuptest.Form(page.Body, "create"); err != nil || action != "/tools/perfgate/setup/create" || !strings.Contains(page.Body, `src="/tools/perfgate/setup/setup.js"`) {
		t.Errorf("form action %q (%v), script in page: %v", action, err, strings.Contains(page.Body, "/tools/perfgate/setup/setup.js"))
	}
	if p := setuptest.Create(t, b, h.flow.StartURL(), "acme-gpu"); !strings.Contains(p.Body, "GitHub App created") {
		t.Fatalf("setup under a prefix: %d\n%s", p.Status, p.Body)
	}
	apps := h.gh.ManifestApps()
	if len(apps) != 1 || apps[0].Owner != "acme-gpu" || apps[0].Manifest["redirect_url"] != base+"/setup/redirect" ||
		apps[0].Manifest["hook_attributes"].(map[string]any)["url"] != base+"/api/github/hook" {
		t.Errorf("apps %+v", apps)
	}
	if apps[0].Owner == githubtest.SignedInUser {
		t.Error("the app landed on the personal account")
	}
}

// Mounted under the path itself (a proxy that passes the path on), the
// flow's handler serves the same pages.
func TestSetupHandlerTakesThePrefixedPath(t *testing.T) {
	h := newHarnessAt(t, "/tools/perfgate", "", nil)
	srv := httptest.NewServer(h.flow.Handler())
	defer srv.Close()
	u, _ := url.Parse(h.flow.StartURL())
	p := setuptest.Get(t, setuptest.Browser(t), srv.URL+u.Path+"?"+u.RawQuery)
	if p.Status != http.StatusOK || p.URL.Path != "/tools/perfgate/setup" || !strings.Contains(p.Body, `action="/tools/perfgate/setup/create"`) {
		t.Errorf("prefixed path: %d at %s\n%s", p.Status, p.URL, p.Body)
	}
}
