package dispatch

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/outbox"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const (
	testRepo = "acme/inference"
	headSHA  = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T, gh *githubtest.Server, dsn string, clock *testClock) (*Service, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, store.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	clients, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	// An empty perfgate.yml: the defaults.
	gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# perfgate defaults\n"))
	return New(Options{Store: st, Clients: clients, Now: clock.now, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		JudgePolicy: backoff.Policy{Base: time.Millisecond, Max: time.Millisecond, MaxAttempts: 2}}), st
}

// sender is the outbox over the same store and clock, with retries due at
// once on the test clock.
func sender(svc *Service, st store.Store, clock *testClock) *outbox.Sender {
	return outbox.New(outbox.Options{Store: st, Clients: svc.clients, Now: clock.now, Log: zerolog.Nop(),
		Policy: backoff.Policy{Base: time.Nanosecond, Max: time.Nanosecond}})
}

// flush sends every due GitHub write.
func flush(t *testing.T, ob *outbox.Sender) {
	t.Helper()
	for range 50 {
		n, err := ob.Pass(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the outbox did not drain")
}

// The escalation deadline lives in the store: a server that restarts in
// the 48 hours still escalates, once, with one comment.
func TestEscalationSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	l := newLifecycle(t)
	l.baseline(1.3)
	id := l.request(headSHA, false)
	l.runAll()
	if c := l.check(id); c.Conclusion != "neutral" {
		t.Fatalf("first verdict %s", c.Conclusion)
	}
	// Before the deadline nothing happens.
	if err := l.svc.Escalate(ctx); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if n := len(l.gh.Comments()); n != 1 {
		t.Fatalf("escalated early: %d comments, want only the warning", n)
	}
	l.restart()
	l.clock.add(49 * time.Hour)
	for i := 0; i < 2; i++ {
		if err := l.svc.Escalate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l.flush()
	if c := l.check(id); c.Conclusion != "failure" {
		t.Errorf("after the deadline: conclusion %q, want failure", c.Conclusion)
	}
	if cs := l.gh.Comments(); len(cs) != 2 || !strings.Contains(cs[1].Body, "now blocking") {
		t.Errorf("want the warning and exactly one escalation comment, got %d: %v", len(cs), cs)
	}
	if row := l.row(headSHA); row.State != store.CheckEscalated || !row.Deadline.IsZero() {
		t.Errorf("stored row after escalation: %+v", row)
	}
}

// A new push clears the older commit's clock: its warning can no longer
// escalate.
func TestSupersedeClearsOldDeadline(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	l.request(headSHA, false)
	l.runAll()
	if l.row(headSHA).Deadline.IsZero() {
		t.Fatal("no clock after a regression")
	}
	if err := l.svc.Supersede(l.ctx, testRepo, 17, newSHA); err != nil {
		t.Fatal(err)
	}
	l.clock.add(49 * time.Hour)
	due, err := l.st.DueCheckRuns(l.ctx)
	if err != nil || len(due) != 0 {
		t.Errorf("old commit still due for escalation after a new push: %v %v", due, err)
	}
}

// A published release promotes the verified nightly runs at its commit as
// the baseline version named by the tag; with no runs there it promotes
// nothing and says why in the audit log.
func TestReleasePromotesVerifiedRuns(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
	clock := &testClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	svc, st := newService(t, gh, filepath.Join(t.TempDir(), "db"), clock)
	defer st.Close()

	if err := svc.ReleasePublished(ctx, request.Release{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", Tag: "v1.0.0", TargetCommit: headSHA, By: "octocat"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LatestBaseline(ctx, testRepo, "nightly"); err == nil {
		t.Fatal("a release with no runs at its commit promoted a baseline")
	}

	cfg := config.Default()
	plan, err := agentapi.PlanFromConfig(cfg, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	plan.Repo, plan.HeadSHA = testRepo, headSHA
	snap, err := newSnapshot(cfg, plan)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := snap.encode()
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: testRepo, HeadSHA: headSHA, BaseSHA: headSHA, Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: ag.Labels, Lease: time.Minute})
	if err != nil || claimed.ID != job.ID {
		t.Fatalf("claim: %v %v", claimed.ID, err)
	}
	for i, r := range verifiedRuns(5) {
		full, _ := json.Marshal(r)
		if _, _, err := st.PutResult(ctx, store.ResultUpload{JobID: job.ID, LeaseID: claimed.LeaseID, IdempotencyKey: "m" + string(rune('0'+i)),
			RunIndex: i, Kind: jobstate.KindMeasured, Summary: full, Samples: full}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Finish(ctx, job.ID, claimed.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if err := svc.ReleasePublished(ctx, request.Release{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", Tag: "v1.1.0", TargetCommit: headSHA, By: "octocat"}); err != nil {
		t.Fatal(err)
	}
	b, err := st.LatestBaseline(ctx, testRepo, "nightly")
	if err != nil {
		audit, _ := st.ListAudit(ctx, testRepo, 0)
		t.Fatalf("release did not promote: %v; audit: %+v", err, audit)
	}
	if b.Commit != headSHA || b.PromotedBy != "octocat" {
		t.Errorf("baseline %+v: want commit %s promoted by octocat", b, headSHA)
	}
}

// A release on a repository perfgate never measured on the nightly or
// merge tier (one without .github/perfgate.yml) promotes nothing, says so
// in the audit log, and asks GitHub nothing: resolving its branch there
// could only fail the delivery (a 404 from a repository the app cannot
// read).
func TestReleaseOnUnmeasuredRepositoryAsksNothing(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
	clock := &testClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	svc, st := newService(t, gh, filepath.Join(t.TempDir(), "db"), clock)
	defer st.Close()
	if err := svc.ReleasePublished(ctx, request.Release{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "tokenizer", Tag: "v0.3.0", TargetCommit: "main", By: "monalisa"}); err != nil {
		t.Fatalf("release on an unmeasured repository: %v", err)
	}
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("%d GitHub requests for a release on a repository perfgate never measured", n)
	}
	audit, err := st.ListAudit(ctx, "acme/tokenizer", 0)
	if err != nil || len(audit) != 1 || audit[0].Action != "release.published" || !strings.Contains(string(audit[0].Detail), "no verified nightly or merge runs") {
		t.Errorf("audit %+v (%v), want one release.published entry saying why nothing was promoted", audit, err)
	}
}

func verifiedRuns(n int) []*result.Result {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]*result.Result, n)
	for i := range out {
		r := &result.Result{Completed: 1000, Duration: 25, Metrics: map[string]float64{}, RequestRate: result.Inf,
			Perfgate: &result.Section{SchemaVersion: result.SchemaVersion,
				Environment: result.Environment{GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-5f3e2d1c-0b9a-8f7e-6d5c-4b3a2f1e0d9c",
					Driver: "550.54.15", CUDA: "12.4", EngineImage: "vllm/vllm-openai@sha256:" + strings.Repeat("ab", 32), Commit: headSHA},
				Load:        result.Load{Endpoint: "/v1/completions", Model: "m", Dataset: "random", NumPrompts: 1000, RequestRate: result.Inf, Burstiness: 1},
				DatasetHash: strings.Repeat("9b", 32)}}
		for k, v := range map[string]float64{"p99_ttft_ms": 200, "median_ttft_ms": 120, "p99_tpot_ms": 12, "median_tpot_ms": 10,
			"p99_itl_ms": 15, "p99_e2el_ms": 1500, "median_e2el_ms": 1200} {
			r.Metrics[k] = v * math.Exp(0.01*rng.NormFloat64())
		}
		r.OutputThroughput = 5000 * math.Exp(0.01*rng.NormFloat64())
		r.RequestThroughput = 40 * math.Exp(0.01*rng.NormFloat64())
		out[i] = r
	}
	return out
}
