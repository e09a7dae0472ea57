package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"

	"github.com/perfgate/perfgate/internal/githubtest"
	"github.com/perfgate/perfgate/internal/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/metrics"
	"github.com/perfgate/perfgate/internal/metrics/metricstest"
)

// Wired as perfgate's app wires it (internal/app/clients.go): the
// transport wraps the installation client and, inside it, the transport
// that fetches the installation's tokens. Each API request is counted
// once, and so is the token POST.
func TestGitHubTransportCountsTokenFetchOnce(t *testing.T) {
	t.Parallel()
	gh := ghtest.New(t)
	m := metrics.New(nil)
	apps, err := ghinstallation.NewAppsTransport(m.GitHubTransport(http.DefaultTransport), githubtest.AppID, gh.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	apps.BaseURL = gh.URL
	itr := ghinstallation.NewFromAppsTransport(apps, githubtest.InstallationID)
	client := &http.Client{Transport: m.GitHubTransport(itr), Timeout: 30 * time.Second}
	for range 2 { // the second request reuses the token
		resp, err := client.Get(gh.URL + "/repos/acme/inference/pulls/1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL)
	gets := gh.RequestsTo("GET", "/repos/acme/inference/pulls/1")
	tokens := gh.RequestsTo("POST", "/app/installations/4242/access_tokens")
	if len(gets) != 2 || len(tokens) != 1 {
		t.Fatalf("GitHub saw %d GETs and %d token POSTs, want 2 and 1", len(gets), len(tokens))
	}
	for _, tt := range []struct {
		method, status string
		want           float64
	}{{"GET", strconv.Itoa(gets[0].Status), 2}, {"POST", strconv.Itoa(tokens[0].Status), 1}} {
		if got, _ := f.Value("perfgate_github_api_requests_total", map[string]string{"method": tt.method, "status": tt.status}); got != tt.want || tt.want == 0 {
			t.Errorf("%s %s counted %v, GitHub answered %v", tt.method, tt.status, got, tt.want)
		}
	}
}

// A server that has seen no event exposes its counters at zero, so
// dashboards show 0 rather than "no data".
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(metrics.New(nil).Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL)
	for _, tt := range []struct {
		name   string
		labels map[string]string
	}{
		{"perfgate_webhook_deliveries_total", map[string]string{"event": "pull_request", "outcome": "accepted"}},
		{"perfgate_webhook_deliveries_total", map[string]string{"event": "issue_comment", "outcome": "bad_signature"}},
		{"perfgate_webhook_processing_seconds", map[string]string{"event": "check_run", "outcome": "error"}},
		{"perfgate_github_api_requests_total", map[string]string{"method": "GET", "status": "200"}},
		{"perfgate_github_api_requests_total", map[string]string{"method": "POST", "status": "error"}},
		{"perfgate_agents_connected", nil},
	} {
		if v, ok := f.Value(tt.name, tt.labels); !ok || v != 0 {
			t.Errorf("%s%v = %v (present %v), want 0", tt.name, tt.labels, v, ok)
		}
	}
}
