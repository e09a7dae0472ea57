package server

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/metrics/metricstest"
	"github.com/perfgate/perfgate/internal/github/setup"
	"github.com/perfgate/perfgate/internal/github/setup/setuptest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
)

// launch prepares cfg and serves it on a fresh loopback port; the server
// stops when the test ends.
func launch(t *testing.T, gh *githubtest.Server, dataDir string) (base string, prep Prepared, logs *syncWriter) {
	t.Helper()
	base, prep, _, logs = launchWith(t, gh, dataDir, nil, nil)
	return base, prep, logs
}

// launchWith is launch with more settings in env (they override the
// fake GitHub's URLs) and tune, when set, changing the prepared config;
// it also returns the server's store.
func launchWith(t *testing.T, gh *githubtest.Server, dataDir string, env map[string]string, tune func(*Config)) (base string, prep Prepared, st store.Store, logs *syncWriter) {
	t.Helper()
	clearEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	t.Setenv("PERFGATE_DATA_DIR", dataDir)
	t.Setenv("PERFGATE_PUBLIC_URL", base)
	t.Setenv("PERFGATE_GITHUB_WEB_URL", gh.URL)
	t.Setenv("PERFGATE_GITHUB_V3_API_URL", gh.URL+"/")
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if prep, err = Prepare(&cfg); err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(&cfg)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err = store.Open(context.Background(), cfg.DatabaseURL); err != nil {
		t.Fatal(err)
	}
	logs = &syncWriter{w: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Launch(ctx, cfg, prep, st, ln, zerolog.New(logs)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Launch: %v", err)
		}
		st.Close()
	})
	return base, prep, st, logs
}

// The manifest flow end to end: a server without credentials serves the
// setup page; the browser creates the app on the test GitHub; the server
// exchanges the code, stores the credentials and — without a restart —
// accepts webhooks signed with the new secret and authenticates to GitHub
// with the new key. A restart then starts from the stored credentials.
func TestLaunchSetupModeToServing(t *testing.T) {
	gh := ghtest.New(t)
	dataDir := filepath.Join(t.TempDir(), "state")
	base, prep, logs := launch(t, gh, dataDir)
	if !prep.Setup {
		t.Fatal("no credentials, yet not in setup mode")
	}
	body := ghtest.Fixture(t, "pull_request/opened.json")
	deliver := func(secret, id string) int {
		req, err := githubtest.NewDelivery(base+"/api/github/hook", "pull_request", id, body, []byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := deliver(githubtest.WebhookSecret, "d-0"); code != http.StatusServiceUnavailable {
		t.Errorf("webhook in setup mode: %d, want 503", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code := get(t, base+p); code != http.StatusOK {
			t.Errorf("%s in setup mode: %d", p, code)
		}
	}

	// The setup link is in the log, and nowhere else.
	key := regexp.MustCompile(regexp.QuoteMeta(base) + `/setup\?key=([0-9a-f]+)`).FindStringSubmatch(logs.String())
	if key == nil {
		t.Fatalf("no setup link in the log:\n%s", logs)
	}
	startURL := key[0]
	page := setuptest.Create(t, setuptest.Browser(t), startURL, "acme")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "GitHub App created") {
		t.Fatalf("after the flow: %d\n%s", page.Status, page.Body)
	}
	apps := gh.ManifestApps()
	if len(apps) != 1 {
		t.Fatalf("%d apps", len(apps))
	}
	newSecret := apps[0].WebhookSecret

	// Sign in with GitHub is on at once, with the OAuth client the
	// conversion returned; GitHub accepts the callback the manifest
	// registered.
	stored, err := setup.Load(dataDir)
	if err != nil || stored.ClientID == "" {
		t.Fatalf("stored OAuth client %q: %v", stored.ClientID, err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authorize := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(authorize, gh.URL+"/login/oauth/authorize?") || !strings.Contains(authorize, "client_id="+stored.ClientID) {
		t.Fatalf("GET /login after setup: %d → %s", resp.StatusCode, authorize)
	}
	if resp, err = noFollow.Get(authorize); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, base+"/oauth/callback?") {
		t.Errorf("GitHub's answer to the sign-in: %d → %s", resp.StatusCode, loc)
	}

	if code := deliver("perfgate-test-webhook-secret", "d-1"); code != http.StatusUnauthorized {
		t.Errorf("webhook signed with another secret: %d, want 401", code)
	}
	if code := deliver(newSecret, "d-2"); code >= 300 {
		t.Fatalf("webhook signed with the new secret: %d", code)
	}
	// Handling the event takes an installation token, which the fake
	// issues only for a JWT signed with the new app's key.
	waitUntil(t, "an installation token for the new app", func() bool {
		for _, r := range gh.RequestsTo("POST", "/app/installations/4242/access_tokens") {
			if r.Status == http.StatusCreated {
				return true
			}
		}
		return false
	})
	tok, err := os.ReadFile(filepath.Join(dataDir, setup.RegistrationTokenFile))
	if err != nil || len(strings.TrimSpace(string(tok))) != 64 {
		t.Errorf("agent registration token: %q %v", tok, err)
	}

	// The event's API calls, the installation-token POST among them, and,
	// once its handler returns, its processing time show in /metrics: the
	// POSTs answered 201 are exactly those GitHub answered (the manifest
	// conversion is the setup's, before the app's clients exist).
	var m metricstest.Families
	var posts, want float64
	waitUntil(t, "the event's API calls and processing in /metrics", func() bool {
		m = metricstest.Scrape(t, base+"/metrics")
		posts, _ = m.Value("perfgate_github_api_requests_total", map[string]string{"method": "POST", "status": "201"})
		want = 0
		for _, r := range gh.Requests() {
			if r.Method == "POST" && r.Status == http.StatusCreated && !strings.HasPrefix(r.Path, "/app-manifests/") {
				want++
			}
		}
		handled, _ := m.Value("perfgate_webhook_processing_seconds", map[string]string{"event": "pull_request", "outcome": "ok"})
		return posts >= 1 && posts == want && handled >= 1
	})
	for _, fam := range []string{"perfgate_webhook_deliveries_total", "perfgate_webhook_processing_seconds", "perfgate_github_api_requests_total", "perfgate_agents_connected"} {
		if _, ok := m[fam]; !ok {
			t.Errorf("/metrics lacks %s", fam)
		}
	}
	if got, _ := m.Value("perfgate_webhook_deliveries_total", map[string]string{"event": "pull_request", "outcome": "bad_signature"}); got != 1 {
		t.Errorf("bad-signature deliveries = %v, want 1", got)
	}
}

func TestLaunchRestartUsesStoredCredentials(t *testing.T) {
	gh := ghtest.New(t)
	dataDir := t.TempDir()
	if err := setup.Save(dataDir, setup.Credentials{AppID: githubtest.AppID, Slug: "perfgate", WebhookSecret: "stored-webhook-secret-0123456789", PrivateKeyPEM: string(gh.KeyPEM)}); err != nil {
		t.Fatal(err)
	}
	base, prep, _ := launch(t, gh, dataDir)
	if prep.Setup || prep.Stored == nil {
		t.Fatalf("prepared %+v", prep)
	}
	req, err := githubtest.NewDelivery(base+"/api/github/hook", "pull_request", "r-1", ghtest.Fixture(t, "pull_request/opened.json"), []byte("stored-webhook-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Errorf("webhook: %d", resp.StatusCode)
	}
	// The setup page no longer offers to create an app.
	p := setuptest.Get(t, setuptest.Browser(t), base+"/setup")
	if !strings.Contains(p.Body, "perfgate is set up") {
		t.Errorf("setup page:\n%s", p.Body)
	}
}

func get(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, cond)
}

// syncWriter lets the test read the log while the server writes it.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
