package metrics_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/perfgate/perfgate/internal/vocab/check"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/metrics"
	"github.com/perfgate/perfgate/internal/github/metrics/metricstest"
)

// Wired as perfgate's app wires it (internal/github/app/clients.go): the
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

// A server that has seen no event exposes every family, at zero, so
// dashboards show 0 rather than "no data" and alerts can be written
// before the first job. A family added without a starting series fails
// the second half.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		nan    bool // unknown, not zero: a 0 would fire an alert
	}{
		{name: "perfgate_webhook_deliveries_total", labels: map[string]string{"event": "pull_request", "outcome": "accepted"}},
		{name: "perfgate_webhook_deliveries_total", labels: map[string]string{"event": "issue_comment", "outcome": "bad_signature"}},
		{name: "perfgate_webhook_processing_seconds", labels: map[string]string{"event": "check_run", "outcome": "error"}},
		{name: "perfgate_github_api_requests_total", labels: map[string]string{"method": "GET", "status": "200"}},
		{name: "perfgate_github_api_requests_total", labels: map[string]string{"method": "POST", "status": "error"}},
		{name: "perfgate_agents_connected"},
		{name: "perfgate_jobs", labels: map[string]string{"state": "queued", "tier": "quick", "labels": "gpu"}},
		{name: "perfgate_jobs", labels: map[string]string{"state": "running", "tier": "merge", "labels": "gpu"}},
		{name: "perfgate_job_duration_seconds", labels: map[string]string{"tier": "quick", "status": "succeeded"}},
		{name: "perfgate_job_duration_seconds", labels: map[string]string{"tier": "nightly", "status": "failed"}},
		{name: "perfgate_check_run_conclusions_total", labels: map[string]string{"check": "perfgate / quick", "conclusion": "success"}},
		{name: "perfgate_check_run_conclusions_total", labels: map[string]string{"check": "perfgate / merge", "conclusion": "failure"}},
		{name: "perfgate_github_rate_limit_remaining", labels: map[string]string{"resource": "core"}, nan: true},
	} {
		v, ok := f.Value(tt.name, tt.labels)
		if !ok || (tt.nan != math.IsNaN(v)) || (!tt.nan && v != 0) {
			t.Errorf("%s%v = %v (present %v), want %s", tt.name, tt.labels, v, ok, map[bool]string{true: "NaN", false: "0"}[tt.nan])
		}
	}
	// Every registered perfgate family is in the first scrape but the one
	// keyed by an agent's name, which no server knows before its agents.
	descs := make(chan *prometheus.Desc)
	go func() { m.Registry().Describe(descs); close(descs) }()
	for d := range descs {
		name := descName(d)
		if !strings.HasPrefix(name, "perfgate_") || name == "perfgate_agent_last_seen_timestamp_seconds" {
			continue
		}
		if _, ok := f[name]; !ok {
			t.Errorf("%s is not exported before its first event", name)
		}
	}
}

// Every conclusion a check can show is among the ones exported at zero.
func TestMetricsZeroEveryConclusion(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(metrics.New(nil).Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL)
	for _, p := range []check.Phase{check.Passed, check.Warned, check.Escalated, check.Accepted, check.Inconclusive, check.NeedsAck,
		check.Errored, check.Skipped, check.Superseded, check.Closed, check.Waiting, check.ConfigError, check.NotConfigured} {
		labels := map[string]string{"check": check.CheckName(check.TierQuick), "conclusion": p.Conclusion()}
		if _, ok := f.Value("perfgate_check_run_conclusions_total", labels); !ok {
			t.Errorf("phase %s: no starting series %v", p, labels)
		}
	}
}

// descName reads fqName out of a Desc's String form.
func descName(d *prometheus.Desc) string {
	s := d.String()
	_, rest, _ := strings.Cut(s, `fqName: "`)
	name, _, _ := strings.Cut(rest, `"`)
	return name
}
