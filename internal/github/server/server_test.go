package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

func TestNewRefusesUnsafeConfig(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no webhook secret", func(c *Config) { c.GitHub.App.WebhookSecret = "" }, "webhook secret is empty"},
		{"no registration token", func(c *Config) { c.AgentRegistrationToken = "" }, "PERFGATE_AGENT_REGISTRATION_TOKEN"},
		{"blank registration token", func(c *Config) { c.AgentRegistrationToken = "               " }, "shorter than 16 characters"},
		{"short registration token", func(c *Config) { c.AgentRegistrationToken = "letmein" }, "shorter than 16 characters"},
		{"short webhook secret", func(c *Config) { c.GitHub.App.WebhookSecret = "s3cret" }, "webhook secret is shorter than 16"},
		{"unknown unconfigured mode", func(c *Config) { c.Unconfigured = "loud" }, "not quiet or neutral"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken}
			tt.edit(&cfg)
			_, err := New(cfg, st, zerolog.Nop(), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// One handler serves the webhook, the agent API, health and metrics.
func TestEndpoints(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken}, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	tests := []struct {
		method, path, body string
		want               int
		contains           string
	}{
		{"GET", "/healthz", "", 200, "ok"},
		{"GET", "/readyz", "", 200, "ok"},
		{"GET", "/metrics", "", 200, "perfgate_agents_connected 0"},
		{"POST", "/api/v1/jobs/claim", "", 401, ""},
		{"POST", "/api/v1/jobs/claim", strings.Repeat("x", 8<<10), 413, "over this route's limit"},
		{"POST", "/api/v1/agents/register", strings.Repeat("x", 100<<10), 413, "over this route's limit of 65536"},
		{"GET", "/metrics", "", 200, `perfgate_webhook_inbox{status="pending"} 0`},
		{"GET", "/metrics", "", 200, `perfgate_github_writes{status="failed"} 0`},
		{"POST", "/api/github/hook", `{"action":"opened"}`, 401, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
		if tt.path == "/api/github/hook" {
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-GitHub-Delivery", "d-1")
			req.Header.Set("X-Hub-Signature-256", "sha256=00")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.contains) {
			t.Errorf("%s %s: %d %q, want %d containing %q", tt.method, tt.path, resp.StatusCode, b, tt.want, tt.contains)
		}
	}
}

func TestLoadConfigEnvOverridesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(path, []byte("addr: \":9000\"\ndatabase_url: /var/lib/perfgate.db\nescalate_every: 5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PERFGATE_DATABASE_URL", "postgres://pg/perfgate")
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":9000" || cfg.DatabaseURL != "postgres://pg/perfgate" || cfg.EscalateEvery.Minutes() != 5 {
		t.Errorf("config = %+v", cfg)
	}
	if err := os.WriteFile(path, []byte("adr: \":9000\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "adr") {
		t.Errorf("unknown key: %v, want an error naming it", err)
	}
	t.Setenv("PERFGATE_LEASE", "soon")
	if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "PERFGATE_LEASE") {
		t.Errorf("bad duration: %v", err)
	}
}

// Every timeout a slow client could exploit is set.
func TestHTTPServerTimeouts(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, LongPoll: 30 * time.Second}, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Errorf("server timeouts: %+v", hs)
	}
	if hs.WriteTimeout <= 30*time.Second {
		t.Errorf("write timeout %v does not outlast the 30 s long poll", hs.WriteTimeout)
	}
}

// The results route takes a large body from an agent, but refuses one
// declared over its limit before reading a byte (no authentication needed
// to be refused, none granted by sending).
func TestAgentResultsLimit(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken}, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/api/v1/jobs/7/results", strings.NewReader("{}"))
	req.ContentLength = 65 << 20
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("65 MiB result: %d, want 413", rec.Code)
	}
	req = httptest.NewRequest("POST", "/api/v1/jobs/7/results", strings.NewReader("{}"))
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("small result without a token: %d, want 401 from the agent API", rec.Code)
	}
}
