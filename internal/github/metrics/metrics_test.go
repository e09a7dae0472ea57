package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/metrics"
	"github.com/perfgate/perfgate/internal/github/metrics/metricstest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Every family the issue asks for is exposed and moves with the events
// that feed it; the scrape is parsed with Prometheus's own text parser.
func TestMetricsFamiliesMoveWithEvents(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m := metrics.New(func() time.Time { return now })
	raw, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// One job queued before the server starts: the seed must see it.
	if _, err := raw.Enqueue(ctx, store.JobSpec{Tier: "nightly", Repo: "acme/x", HeadSHA: "a", Labels: []string{"gpu", "a100"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Resync(ctx, raw); err != nil {
		t.Fatal(err)
	}
	st := m.Store(raw)

	// Queue: two quick jobs, one claimed and finished, one superseded.
	agent, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "gpu-host-1", Labels: []string{"gpu"}, TokenHash: store.HashToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	for _, sha := range []string{"b", "c"} {
		if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Repo: "acme/x", PRNumber: 1, HeadSHA: sha, Labels: []string{"gpu"}}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := st.Claim(ctx, store.ClaimRequest{AgentID: agent.ID, Labels: []string{"gpu"}, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AgentByTokenHash(ctx, store.HashToken("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, job.ID, job.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CancelSuperseded(ctx, "acme/x", 1, "d"); err != nil {
		t.Fatal(err)
	}
	// A check's step that queues the base commit's job (no baseline).
	if _, ok, err := st.ApplyCheck(ctx, store.CheckChange{Repo: "acme/x", HeadSHA: strings.Repeat("e", 40), Tier: "merge", State: store.CheckInProgress,
		BaseJob: &store.JobSpec{Tier: "merge", Kind: "baseline", Repo: "acme/x", HeadSHA: "f", Labels: []string{"gpu"}}}); err != nil || !ok {
		t.Fatalf("a step with the base commit's job = %v, %v", ok, err)
	}
	// A regression's step that queues its profiling pass.
	if _, ok, err := st.ApplyCheck(ctx, store.CheckChange{Repo: "acme/x", HeadSHA: strings.Repeat("9", 40), Tier: "merge", State: store.CheckInProgress,
		ProfileJob: &store.JobSpec{Tier: "profile", Kind: "profile", Repo: "acme/x", HeadSHA: "9", Labels: []string{"gpu"}}}); err != nil || !ok {
		t.Fatalf("a step with a profiling job = %v, %v", ok, err)
	}

	// GitHub: a check run concluded through a client with the transport;
	// the fake answers with rate-limit headers only on scripted failures.
	gh := ghtest.New(t)
	gh.RateLimitNext("GET", "/rate_limit_probe", 1, now.Add(time.Hour))
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig(), githubapp.WithClientMiddleware(m.GitHubTransport))
	if err != nil {
		t.Fatal(err)
	}
	client, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Checks.CreateCheckRun(ctx, "acme", "x", github.CreateCheckRunOptions{Name: "perfgate / quick", HeadSHA: strings.Repeat("a", 40),
		Status: github.String("completed"), Conclusion: github.String("neutral")}); err != nil {
		t.Fatal(err)
	}
	req, _ := client.NewRequest("GET", "rate_limit_probe", nil)
	_, _ = client.Do(ctx, req, nil)

	// Webhooks: one accepted and processed, one with a bad signature.
	hook := m.Webhook(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hub-Signature-256") == "bad" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	for _, sig := range []string{"good", "bad"} {
		r := httptest.NewRequest("POST", "/api/github/hook", nil)
		r.Header.Set("X-GitHub-Event", "pull_request")
		r.Header.Set("X-Hub-Signature-256", sig)
		hook.ServeHTTP(httptest.NewRecorder(), r)
	}
	r := httptest.NewRequest("POST", "/api/github/hook", nil)
	r.Header.Set("X-GitHub-Event", "'; DROP TABLE") // sender-controlled: bounded
	hook.ServeHTTP(httptest.NewRecorder(), r)
	m.EventHandled("pull_request", 40*time.Millisecond, nil)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	f := metricstest.Scrape(t, srv.URL)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"perfgate_jobs", map[string]string{"state": "queued", "tier": "nightly", "labels": "a100,gpu"}, 1},
		{"perfgate_jobs", map[string]string{"state": "queued", "tier": "quick", "labels": "gpu"}, 0},
		{"perfgate_jobs", map[string]string{"state": "queued", "tier": "merge", "labels": "gpu"}, 1},
		{"perfgate_jobs", map[string]string{"state": "queued", "tier": "profile", "labels": "gpu"}, 1},
		{"perfgate_jobs", map[string]string{"state": "running", "tier": "quick", "labels": "gpu"}, 0},
		{"perfgate_job_duration_seconds", map[string]string{"tier": "quick", "status": "succeeded"}, 1},
		{"perfgate_agents_connected", nil, 1},
		{"perfgate_agent_last_seen_timestamp_seconds", map[string]string{"agent": "gpu-host-1"}, float64(now.UnixNano()) / 1e9},
		{"perfgate_check_run_conclusions_total", map[string]string{"check": "perfgate / quick", "conclusion": "neutral"}, 1},
		{"perfgate_github_api_requests_total", map[string]string{"method": "POST", "status": "201"}, 1}, // the token fetch is not an API call of perfgate's
		{"perfgate_github_api_requests_total", map[string]string{"method": "GET", "status": "403"}, 1},
		{"perfgate_github_rate_limit_remaining", map[string]string{"resource": "core"}, 0},
		{"perfgate_webhook_deliveries_total", map[string]string{"event": "pull_request", "outcome": "accepted"}, 1},
		{"perfgate_webhook_deliveries_total", map[string]string{"event": "pull_request", "outcome": "bad_signature"}, 1},
		{"perfgate_webhook_deliveries_total", map[string]string{"event": "other", "outcome": "accepted"}, 1},
		{"perfgate_webhook_processing_seconds", map[string]string{"event": "pull_request", "outcome": "ok"}, 1},
	}
	for _, tt := range tests {
		got, ok := f.Value(tt.name, tt.labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	// Resync agrees with what the wrapper kept.
	if err := m.Resync(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	f = metricstest.Scrape(t, srv.URL)
	if got, _ := f.Value("perfgate_jobs", map[string]string{"state": "queued", "tier": "nightly"}); got != 1 {
		t.Errorf("after resync nightly queued = %v", got)
	}
	// A known tier on the default label stays exported at 0 (alerts are
	// written against it before the first job).
	if got, ok := f.Value("perfgate_jobs", map[string]string{"state": "queued", "tier": "quick", "labels": "gpu"}); !ok || got != 0 {
		t.Errorf("after resync quick queued = %v (present %v), want 0", got, ok)
	}
}
