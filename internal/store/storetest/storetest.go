// Package storetest is the conformance suite every store backend passes.
// A backend's test calls Run with a function that returns a DSN for a
// fresh, empty database (a new SQLite file, a new PostgreSQL schema).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Clock is a settable clock for store.WithClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at a fixed instant so stored times are predictable.
func NewClock() *Clock {
	return &Clock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run runs every conformance test; each gets its own database from newDSN.
func Run(t *testing.T, newDSN func(t testing.TB) string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newDSN func(t testing.TB) string)
	}{
		{"MigrationsIdempotent", testMigrations},
		{"Agents", testAgents},
		{"EnqueueClaimOrder", testClaimOrder},
		{"ClaimMatching", testClaimMatching},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimTwoReplicas", testClaimReplicas},
		{"HeartbeatExtends", testHeartbeatExtends},
		{"LeaseExpiryRequeueThenFail", testLeaseExpiry},
		{"StaleLeaseRefused", testStaleLease},
		{"FinishRetry", testFinishRetry},
		{"ResultIdempotency", testResults},
		{"CountMeasuredRuns", testCountRuns},
		{"LogOffsets", testLogs},
		{"CancelSuperseded", testSupersede},
		{"CancelJob", testCancelJob},
		{"Notify", testNotify},
		{"InboxAcceptDedupe", testInboxAccept},
		{"InboxClaimRetryFail", testInboxClaim},
		{"InboxTwoReplicas", testInboxReplicas},
		{"InboxPerSubjectOrder", testInboxOrder},
		{"InboxPlaceLater", testInboxPlaceLater},
		{"JournalFold", testJournalFold},
		{"ReclaimLeasesAfterRestart", testReclaimLeases},
		{"OutboxEffects", testOutbox},
		{"OutboxCheckSyncRearm", testOutboxRearm},
		{"ApplyCheck", testApplyCheck},
		{"ApplyCheckReplaced", testApplyCheckReplaced},
		{"ApplyCheckReplacedJobs", testApplyCheckReplacedJobs},
		{"ApplyCheckCarriesJudgement", testApplyCheckCarries},
		{"JudgeFinishedJobs", testJudge},
		{"CancelPRJobs", testCancelPRJobs},
		{"CheckRunDeadlines", testCheckRuns},
		{"Baselines", testBaselines},
		{"Appeals", testAppeals},
		{"Approvals", testApprovals},
		{"Audit", testAudit},
		{"Trend", testTrend},
		{"DashboardReads", testDashboardReads},
		{"ChangePoints", testChangePoints},
		{"RootCauses", testRootCauses},
		{"Bisects", testBisects},
		{"Artifacts", testArtifacts},
		{"ArtifactRetention", testArtifactRetention},
		{"FleetPriorities", testFleetPriorities},
		{"FleetFairShare", testFleetFairShare},
		{"FleetHandoff", testFleetHandoff},
		{"FleetDrain", testFleetDrain},
		{"FleetPinned", testFleetPinned},
		{"FleetCards", testFleetCards},
		{"FleetUsage", testFleetUsage},
		{"FleetRefund", testFleetRefund},
		{"FleetAging", testFleetAging},
		{"FleetArrivals", testFleetArrivals},
		{"RunningQueuedChecks", testRunningQueuedChecks},
		{"Singletons", testSingletons},
		{"Sessions", testSessions},
		{"NotifyAcrossReplicas", testNotifyAcrossReplicas},
		{"ClaimUnservedPool", testClaimUnservedPool},
		{"UsageInSQL", testUsageInSQL},
		{"OutboxPriorities", testOutboxPriorities},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newDSN)
		})
	}
}

// env is one test's store and clock.
type env struct {
	st    store.Store
	clock *Clock
	dsn   string
	ctx   context.Context
}

func newEnv(t *testing.T, newDSN func(t testing.TB) string) *env {
	t.Helper()
	e := &env{clock: NewClock(), dsn: newDSN(t), ctx: context.Background()}
	e.st = e.open(t)
	return e
}

// open opens another Store on the same database: another replica.
func (e *env) open(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(e.ctx, e.dsn, store.WithClock(e.clock.Now))
	if err != nil {
		t.Fatalf("open %s: %v", e.dsn, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func (e *env) enqueue(t *testing.T, spec store.JobSpec) store.Job {
	t.Helper()
	if spec.Repo == "" {
		spec.Repo = "acme/llm"
	}
	if spec.Tier == "" {
		spec.Tier = "quick"
	}
	if spec.HeadSHA == "" {
		spec.HeadSHA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	}
	j, err := e.st.Enqueue(e.ctx, spec)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return j
}

func (e *env) claim(t *testing.T, labels, gpus []string, lease time.Duration) store.Job {
	t.Helper()
	j, err := e.st.Claim(e.ctx, store.ClaimRequest{Labels: labels, GPUUUIDs: gpus, Lease: lease})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j
}

func testMigrations(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	j := e.enqueue(t, store.JobSpec{Config: []byte("tier: quick\n")})
	if err := e.st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Reopening must not re-apply migrations (CREATE TABLE would fail) and
	// must keep the data.
	again := e.open(t)
	got, err := again.GetJob(e.ctx, j.ID)
	if err != nil {
		t.Fatalf("get job after reopen: %v", err)
	}
	if string(got.Config) != "tier: quick\n" {
		t.Errorf("config after reopen = %q", got.Config)
	}
	// Replicas starting at once on a fresh database must not race on DDL.
	fresh := &env{clock: e.clock, dsn: newDSN(t), ctx: e.ctx}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := store.Open(e.ctx, fresh.dsn, store.WithClock(e.clock.Now))
			if err != nil {
				errs <- err
				return
			}
			errs <- st.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
}

func testAgents(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	oldHash := store.HashToken("token-1")
	a, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{
		Name: "gpu-host-1", Labels: []string{"gpu", "h100"}, GPUUUIDs: []string{"GPU-1"}, TokenHash: oldHash,
	})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	got, err := e.st.AgentByTokenHash(e.ctx, oldHash)
	if err != nil || got.ID != a.ID || got.Name != "gpu-host-1" || len(got.Labels) != 2 || got.GPUUUIDs[0] != "GPU-1" {
		t.Fatalf("by token = %+v, %v", got, err)
	}
	if _, err := e.st.AgentByTokenHash(e.ctx, store.HashToken("wrong")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown token: err = %v, want ErrNotFound", err)
	}
	// Another registration cannot take a live name (its token, its cards).
	if _, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "gpu-host-1", TokenHash: store.HashToken("thief")}); !errors.Is(err, store.ErrNameTaken) {
		t.Errorf("registering a name in use: %v, want ErrNameTaken", err)
	}
	// Re-registering with the name's token keeps the ID and retires the old token.
	e.clock.Advance(time.Minute)
	newHash := store.HashToken("token-2")
	b, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "gpu-host-1", Labels: []string{"gpu"}, TokenHash: newHash, PreviousTokenHash: oldHash})
	if err != nil {
		t.Fatalf("re-register: %v", err)
	}
	if b.ID != a.ID || len(b.Labels) != 1 {
		t.Errorf("re-register = %+v, want same ID %d and new labels", b, a.ID)
	}
	if _, err := e.st.AgentByTokenHash(e.ctx, oldHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old token after re-register: err = %v, want ErrNotFound", err)
	}
	// A claim is a sign of life, job or not.
	e.clock.Advance(time.Minute)
	if _, err := e.st.Claim(e.ctx, store.ClaimRequest{AgentID: a.ID, Lease: time.Minute}); !errors.Is(err, store.ErrNoJob) {
		t.Fatalf("claim on empty queue: %v, want ErrNoJob", err)
	}
	agents, err := e.st.ListAgents(e.ctx)
	if err != nil || len(agents) != 1 {
		t.Fatalf("list agents = %v, %v", agents, err)
	}
	if !agents[0].LastSeenAt.Equal(e.clock.Now()) {
		t.Errorf("last seen = %v, want %v", agents[0].LastSeenAt, e.clock.Now())
	}
	if h := store.HashToken("x"); len(h) != 64 || h == "x" {
		t.Errorf("HashToken = %q, want 64 hex chars", h)
	}

	// Revoking cuts the token off and frees the name.
	if r, err := e.st.RevokeAgent(e.ctx, "gpu-host-1"); err != nil || r.ID != a.ID {
		t.Fatalf("revoke = %+v, %v", r, err)
	}
	if _, err := e.st.AgentByTokenHash(e.ctx, newHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoked token: %v, want ErrNotFound", err)
	}
	if back, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "gpu-host-1", TokenHash: store.HashToken("token-3")}); err != nil || back.ID != a.ID || back.Drained {
		t.Errorf("registering a revoked name: %+v %v, want its row back, taking jobs", back, err)
	}
	if _, err := e.st.RevokeAgent(e.ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
	// Expiry: only registrations unseen since the cut-off.
	e.clock.Advance(time.Hour)
	if _, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "fresh", TokenHash: store.HashToken("f")}); err != nil {
		t.Fatal(err)
	}
	names, err := e.st.ExpireAgents(e.ctx, e.clock.Now().Add(-time.Minute))
	if err != nil || len(names) != 1 || names[0] != "gpu-host-1" {
		t.Errorf("expired %v, %v; want [gpu-host-1]", names, err)
	}
	if _, err := e.st.AgentByTokenHash(e.ctx, store.HashToken("f")); err != nil {
		t.Errorf("a fresh registration expired: %v", err)
	}
}

func testClaimOrder(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	spec := store.JobSpec{
		Tier: "merge", Kind: "merge_group", Repo: "acme/llm", InstallationID: 42, PRNumber: 7,
		HeadSHA: "1111111111111111111111111111111111111111", BaseSHA: "2222222222222222222222222222222222222222",
		Config: []byte{0, 1, 2, 0xff}, Labels: []string{"gpu"}, CheckRunID: 99,
	}
	first := e.enqueue(t, spec)
	if first.Status != jobstate.Queued || first.MaxAttempts != store.DefaultMaxAttempts || first.Attempts != 0 {
		t.Errorf("enqueued = %+v", first)
	}
	if !first.CreatedAt.Equal(e.clock.Now()) {
		t.Errorf("created = %v, want clock %v", first.CreatedAt, e.clock.Now())
	}
	second := e.enqueue(t, store.JobSpec{MaxAttempts: 5})
	got := e.claim(t, []string{"gpu"}, nil, time.Minute)
	if got.ID != first.ID {
		t.Fatalf("first claim got job %d, want oldest %d", got.ID, first.ID)
	}
	if got.Status != jobstate.Running || got.Attempts != 1 || got.LeaseID == "" ||
		!got.LeaseExpiresAt.Equal(e.clock.Now().Add(time.Minute)) || !got.StartedAt.Equal(e.clock.Now()) {
		t.Errorf("claimed = %+v", got)
	}
	// Every field survives the round trip.
	if got.Tier != spec.Tier || got.Kind != spec.Kind || got.InstallationID != 42 || got.PRNumber != 7 ||
		got.HeadSHA != spec.HeadSHA || got.BaseSHA != spec.BaseSHA || string(got.Config) != string(spec.Config) ||
		got.CheckRunID != 99 || len(got.Labels) != 1 || got.Labels[0] != "gpu" {
		t.Errorf("claimed spec = %+v, want %+v", got.JobSpec, spec)
	}
	next := e.claim(t, []string{"gpu"}, nil, time.Minute)
	if next.ID != second.ID || next.MaxAttempts != 5 {
		t.Errorf("second claim = %+v, want job %d with max 5", next, second.ID)
	}
	if next.LeaseID == got.LeaseID {
		t.Error("two claims share a lease ID")
	}
	if _, err := e.st.Claim(e.ctx, store.ClaimRequest{Lease: time.Minute}); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("claim on drained queue: %v, want ErrNoJob", err)
	}
	if _, err := e.st.Claim(e.ctx, store.ClaimRequest{}); err == nil || errors.Is(err, store.ErrNoJob) {
		t.Errorf("claim without lease: %v, want a usage error", err)
	}
	jobs, err := e.st.ListJobs(e.ctx, store.JobFilter{Repo: "acme/llm", PRNumber: 7})
	if err != nil || len(jobs) != 1 || jobs[0].ID != first.ID {
		t.Errorf("list PR 7 = %v, %v", jobs, err)
	}
	running, err := e.st.ListJobs(e.ctx, store.JobFilter{Status: jobstate.Running})
	if err != nil || len(running) != 2 {
		t.Errorf("list running = %d jobs, %v; want 2", len(running), err)
	}
	e.enqueue(t, store.JobSpec{Tier: "merge", Repo: "acme/llm"})
	latest, err := e.st.ListJobs(e.ctx, store.JobFilter{Repo: "acme/llm", Tier: "merge", Newest: true, Limit: 1})
	if err != nil || len(latest) != 1 || latest[0].ID <= first.ID || latest[0].Status != jobstate.Queued {
		t.Errorf("latest merge job of acme/llm = %v, %v; want the one just queued", latest, err)
	}
	if nightly, err := e.st.ListJobs(e.ctx, store.JobFilter{Tier: "nightly"}); err != nil || len(nightly) != 0 {
		t.Errorf("list nightly = %v, %v; want none", nightly, err)
	}
	if _, err := e.st.GetJob(e.ctx, 123456); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing job: %v, want ErrNotFound", err)
	}
}

func testClaimMatching(t *testing.T, newDSN func(t testing.TB) string) {
	cases := []struct {
		name        string
		jobLabels   []string
		jobGPU      string
		agentLabels []string
		agentGPUs   []string
		match       bool
	}{
		{"no requirements", nil, "", nil, nil, true},
		{"labels subset", []string{"gpu"}, "", []string{"gpu", "h100"}, nil, true},
		{"labels equal", []string{"gpu", "h100"}, "", []string{"h100", "gpu"}, nil, true},
		{"label missing", []string{"gpu", "a100"}, "", []string{"gpu", "h100"}, nil, false},
		{"agent has no labels", []string{"gpu"}, "", nil, nil, false},
		{"pinned GPU present", []string{"gpu"}, "GPU-b", []string{"gpu"}, []string{"GPU-a", "GPU-b"}, true},
		{"pinned GPU absent", []string{"gpu"}, "GPU-c", []string{"gpu"}, []string{"GPU-a", "GPU-b"}, false},
		{"pinned GPU, agent reports none", nil, "GPU-a", nil, nil, false},
		{"pin matches but label missing", []string{"a100"}, "GPU-a", []string{"gpu"}, []string{"GPU-a"}, false},
		{"label is not a prefix match", []string{"gpu"}, "", []string{"gpu2"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newDSN)
			j := e.enqueue(t, store.JobSpec{Labels: tc.jobLabels, GPUUUID: tc.jobGPU})
			got, err := e.st.Claim(e.ctx, store.ClaimRequest{Labels: tc.agentLabels, GPUUUIDs: tc.agentGPUs, Lease: time.Minute})
			switch {
			case tc.match && err != nil:
				t.Fatalf("claim: %v, want job %d", err, j.ID)
			case tc.match && got.ID != j.ID:
				t.Fatalf("claimed %d, want %d", got.ID, j.ID)
			case !tc.match && !errors.Is(err, store.ErrNoJob):
				t.Fatalf("claim = job %d, %v; want ErrNoJob", got.ID, err)
			}
		})
	}
	t.Run("pinned job waits for its host", func(t *testing.T) {
		e := newEnv(t, newDSN)
		pinned := e.enqueue(t, store.JobSpec{GPUUUID: "GPU-x"})
		free := e.enqueue(t, store.JobSpec{})
		if got := e.claim(t, nil, []string{"GPU-y"}, time.Minute); got.ID != free.ID {
			t.Fatalf("other host claimed %d, want unpinned %d", got.ID, free.ID)
		}
		if got := e.claim(t, nil, []string{"GPU-x"}, time.Minute); got.ID != pinned.ID {
			t.Fatalf("pinned host claimed %d, want %d", got.ID, pinned.ID)
		}
	})
}

// drain claims and finishes total jobs from sts with claimers goroutines
// until the queue is empty and returns how often each job was claimed. It
// also checks that Claim says ErrNoJob only when the queue is really empty
// but for jobs other claimers are taking at that moment (at most
// claimers-1): a claimer that gives up while work is queued is a bug even
// if no job runs twice.
func drain(t *testing.T, ctx context.Context, sts []store.Store, claimers, total int) map[int64]int {
	t.Helper()
	var (
		mu     sync.Mutex
		counts = map[int64]int{}
		wg     sync.WaitGroup
		errs   = make(chan error, claimers)
	)
	for i := range claimers {
		st := sts[i%len(sts)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, err := st.Claim(ctx, store.ClaimRequest{Labels: []string{"gpu"}, Lease: time.Minute})
				if errors.Is(err, store.ErrNoJob) {
					mu.Lock()
					left := total - len(counts)
					mu.Unlock()
					if left > claimers-1 {
						errs <- fmt.Errorf("ErrNoJob with %d jobs unclaimed", left)
					}
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				counts[j.ID]++
				mu.Unlock()
				if _, err := st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
					errs <- fmt.Errorf("finish %d: %w", j.ID, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return counts
}

func checkOnce(t *testing.T, counts map[int64]int, ids []int64) {
	t.Helper()
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("job %d claimed %d times, want exactly 1", id, counts[id])
		}
	}
	if len(counts) != len(ids) {
		t.Errorf("claimed %d distinct jobs, want %d", len(counts), len(ids))
	}
}

func enqueueMany(t *testing.T, e *env, n int) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for i := range n {
		j := e.enqueue(t, store.JobSpec{PRNumber: i + 1, Labels: []string{"gpu"}})
		ids = append(ids, j.ID)
	}
	return ids
}

func testClaimConcurrent(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	ids := enqueueMany(t, e, 200)
	checkOnce(t, drain(t, e.ctx, []store.Store{e.st}, 20, len(ids)), ids)
	left, err := e.st.ListJobs(e.ctx, store.JobFilter{Status: jobstate.Succeeded})
	if err != nil || len(left) != 200 {
		t.Errorf("succeeded jobs = %d, %v; want 200", len(left), err)
	}
}

func testClaimReplicas(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t) // a second server replica on the same database
	ids := enqueueMany(t, e, 200)
	checkOnce(t, drain(t, e.ctx, []store.Store{e.st, other}, 20, len(ids)), ids)
}

func testHeartbeatExtends(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	j := e.claim(t, nil, nil, time.Minute)
	for range 3 {
		e.clock.Advance(50 * time.Second)
		cancel, err := e.st.Heartbeat(e.ctx, j.ID, j.LeaseID, time.Minute)
		if err != nil || cancel {
			t.Fatalf("heartbeat = %v, %v", cancel, err)
		}
	}
	// 150 s after a 60 s lease: alive only because the heartbeats extended it.
	reaped, err := e.st.ReapExpired(e.ctx)
	if err != nil || len(reaped) != 0 {
		t.Fatalf("reap after heartbeats = %v, %v; want nothing", reaped, err)
	}
	got, _ := e.st.GetJob(e.ctx, j.ID)
	if !got.LeaseExpiresAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Errorf("lease expires %v, want %v", got.LeaseExpiresAt, e.clock.Now().Add(time.Minute))
	}
}

func testLeaseExpiry(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	job := e.enqueue(t, store.JobSpec{PRNumber: 3})
	var leases []string
	for attempt := 1; attempt <= 3; attempt++ {
		j := e.claim(t, nil, nil, time.Minute)
		if j.ID != job.ID || j.Attempts != attempt {
			t.Fatalf("claim %d = job %d attempt %d", attempt, j.ID, j.Attempts)
		}
		leases = append(leases, j.LeaseID)
		e.clock.Advance(59 * time.Second)
		if reaped, err := e.st.ReapExpired(e.ctx); err != nil || len(reaped) != 0 {
			t.Fatalf("reap before expiry = %v, %v", reaped, err)
		}
		e.clock.Advance(2 * time.Second)
		reaped, err := e.st.ReapExpired(e.ctx)
		if err != nil || len(reaped) != 1 {
			t.Fatalf("reap after expiry = %v, %v", reaped, err)
		}
		got := reaped[0]
		if attempt < 3 {
			if got.Status != jobstate.Queued || got.Attempts != attempt || got.LeaseID != "" || got.AgentID != 0 {
				t.Errorf("after attempt %d: %+v, want queued with attempts kept", attempt, got)
			}
			continue
		}
		if got.Status != jobstate.Failed || got.FailureReason != "agent lost: lease expired 3 times" ||
			!got.FinishedAt.Equal(e.clock.Now()) {
			t.Errorf("after last attempt: status %s reason %q finished %v", got.Status, got.FailureReason, got.FinishedAt)
		}
	}
	if _, err := e.st.Claim(e.ctx, store.ClaimRequest{Lease: time.Minute}); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("failed job claimable again: %v", err)
	}
	for i, l := range leases {
		if _, err := e.st.Heartbeat(e.ctx, job.ID, l, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("heartbeat with lease %d after reap: %v, want ErrLeaseLost", i+1, err)
		}
	}
	audit, err := e.st.ListAudit(e.ctx, "acme/llm", 3)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	want := []string{"job.requeued", "job.requeued", "job.failed"}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Errorf("audit actions = %v, want %v", actions, want)
	}
}

func testStaleLease(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	lost := e.claim(t, nil, nil, time.Minute)
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	cur := e.claim(t, nil, nil, time.Minute)
	if cur.ID != lost.ID || cur.LeaseID == lost.LeaseID {
		t.Fatalf("re-claim = job %d lease %q", cur.ID, cur.LeaseID)
	}
	ops := []struct {
		name string
		call func(lease string) error
	}{
		{"heartbeat", func(l string) error { _, err := e.st.Heartbeat(e.ctx, cur.ID, l, time.Minute); return err }},
		{"result", func(l string) error {
			_, _, err := e.st.PutResult(e.ctx, store.ResultUpload{JobID: cur.ID, LeaseID: l, IdempotencyKey: "k-" + l, Kind: jobstate.KindMeasured})
			return err
		}},
		{"log", func(l string) error { _, err := e.st.AppendLog(e.ctx, cur.ID, l, 0, nil); return err }},
		// Finish last: it ends the current lease.
		{"finish", func(l string) error { _, err := e.st.Finish(e.ctx, cur.ID, l, jobstate.Succeeded, ""); return err }},
	}
	for _, op := range ops {
		for _, stale := range []string{lost.LeaseID, "", "not-a-lease"} {
			if err := op.call(stale); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("%s with stale lease %q: %v, want ErrLeaseLost", op.name, stale, err)
			}
		}
		if err := op.call(cur.LeaseID); err != nil {
			t.Errorf("%s with current lease: %v", op.name, err)
		}
	}
	// A finished job refuses everything but a retry of its own finish.
	if _, err := e.st.Heartbeat(e.ctx, cur.ID, cur.LeaseID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("heartbeat after finish: %v, want ErrLeaseLost", err)
	}
	if _, err := e.st.AppendLog(e.ctx, cur.ID, cur.LeaseID, 0, []byte("x")); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("log after finish: %v, want ErrLeaseLost", err)
	}
}

func testFinishRetry(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	j := e.claim(t, nil, nil, time.Minute)
	e.clock.Advance(time.Second)
	done, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Failed, "engine never became ready")
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != jobstate.Failed || done.FailureReason != "engine never became ready" ||
		!done.FinishedAt.Equal(e.clock.Now()) || !done.LeaseExpiresAt.IsZero() {
		t.Errorf("finished = %+v", done)
	}
	again, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Failed, "engine never became ready")
	if err != nil || again.ID != j.ID {
		t.Errorf("retried finish = %v; want the finished job", err)
	}
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("contradicting finish: %v, want ErrLeaseLost", err)
	}
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Running, ""); err == nil {
		t.Error("finish with a non-final status accepted")
	}
	// A finished job is never reaped.
	e.clock.Advance(time.Hour)
	if reaped, err := e.st.ReapExpired(e.ctx); err != nil || len(reaped) != 0 {
		t.Errorf("reap finished = %v, %v", reaped, err)
	}
}

// A job finishes succeeded only with its plan's measured runs: warm-ups
// and runs of an earlier attempt do not count.
func testCountRuns(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	j := e.claim(t, nil, nil, time.Minute)
	put := func(j store.Job, key string, run int, kind jobstate.ResultKind) {
		t.Helper()
		if _, _, err := e.st.PutResult(e.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: key, RunIndex: run, Kind: kind,
			Summary: json.RawMessage(`{}`), Environment: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	put(j, "w0", 0, jobstate.KindWarmup)
	put(j, "m0", 0, jobstate.KindMeasured)
	put(j, "m1", 1, jobstate.KindMeasured)
	if n, err := e.st.CountMeasuredRuns(e.ctx, j.ID); err != nil || n != 2 {
		t.Errorf("measured runs = %d, %v; want 2", n, err)
	}
	// The lease lapses; the next attempt starts from none.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	j2 := e.claim(t, nil, nil, time.Minute)
	if n, err := e.st.CountMeasuredRuns(e.ctx, j2.ID); err != nil || n != 0 {
		t.Errorf("measured runs of the new attempt = %d, %v; want 0", n, err)
	}
}

func testResults(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	j := e.claim(t, nil, nil, time.Minute)
	up := store.ResultUpload{
		JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: "measured-0", RunIndex: 0, Kind: jobstate.KindMeasured,
		GPUUUID: "GPU-a", Summary: json.RawMessage(`{"output_throughput": 1234.5}`),
		Environment: json.RawMessage(`{"gpu": {"uuid": "GPU-a", "driver": "550.54"}}`),
		Samples:     []byte(`{"ttfts": [0.1, 0.2]}`),
	}
	first, created, err := e.st.PutResult(e.ctx, up)
	if err != nil || !created {
		t.Fatalf("put = %v, created %v", err, created)
	}
	retry := up
	retry.Summary = json.RawMessage(`{"output_throughput": 1}`) // a retry never overwrites
	again, created, err := e.st.PutResult(e.ctx, retry)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("retry = id %d created %v err %v; want original %d", again.ID, created, err, first.ID)
	}
	assertJSON(t, "summary after retry", again.Summary, `{"output_throughput": 1234.5}`)
	// A second result for the same run under a new key would be an extra
	// run of evidence: refused, and the first stays.
	dup := up
	dup.IdempotencyKey = "measured-0-again"
	if _, _, err := e.st.PutResult(e.ctx, dup); !errors.Is(err, store.ErrRunStored) || !errors.Is(err, store.ErrConflict) {
		t.Errorf("second result for run 0 = %v, want ErrRunStored (a conflict)", err)
	}
	// An interleaved job's runs keep their side and pair.
	paired := store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: "measured-7", RunIndex: 7,
		Kind: jobstate.KindMeasured, Side: "base", Pair: 3}
	if r, created, err := e.st.PutResult(e.ctx, paired); err != nil || !created || r.Side != "base" || r.Pair != 3 {
		t.Errorf("paired put = %+v created %v err %v, want side base pair 3", r, created, err)
	}
	for i, kind := range []jobstate.ResultKind{jobstate.KindMeasured, jobstate.KindWarmup} {
		if _, _, err := e.st.PutResult(e.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID,
			IdempotencyKey: fmt.Sprintf("%s-%d", kind, i+1), RunIndex: i + 1, Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.st.ListResults(e.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("%s/%d", r.Kind, r.RunIndex))
	}
	if fmt.Sprint(order) != "[warmup/2 measured/0 measured/1 measured/7]" {
		t.Errorf("results = %v, want warm-ups first, then by run index, stored once", order)
	}
	if last := got[len(got)-1]; last.Side != "base" || last.Pair != 3 {
		t.Errorf("listed paired run = side %q pair %d, want base 3", last.Side, last.Pair)
	}
	r0 := got[1]
	if r0.GPUUUID != "GPU-a" || string(r0.Samples) != `{"ttfts": [0.1, 0.2]}` || r0.Attempt != 1 || r0.JobID != j.ID {
		t.Errorf("stored result = %+v", r0)
	}
	assertJSON(t, "environment", r0.Environment, `{"gpu": {"uuid": "GPU-a", "driver": "550.54"}}`)
	if _, _, err := e.st.PutResult(e.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: "bad",
		Summary: json.RawMessage(`{not json`)}); err == nil {
		t.Error("invalid summary JSON accepted")
	}
	// The lost first attempt's results are not the job's results: the
	// second attempt starts clean, and may reuse the same keys.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	// An upload that landed under the old lease still answers its retry.
	if old, created, err := e.st.PutResult(e.ctx, up); err != nil || created || old.ID != first.ID {
		t.Errorf("retry after lease lost = %v created %v; want the original", err, created)
	}
	j2 := e.claim(t, nil, nil, time.Minute)
	up.LeaseID = j2.LeaseID
	second, created, err := e.st.PutResult(e.ctx, up)
	if err != nil || !created || second.ID == first.ID || second.Attempt != 2 {
		t.Fatalf("second attempt put = %+v created %v err %v", second, created, err)
	}
	got, err = e.st.ListResults(e.ctx, j.ID)
	if err != nil || len(got) != 1 || got[0].ID != second.ID {
		t.Errorf("results after retry = %v, %v; want only attempt 2's", got, err)
	}
}

func assertJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: stored %q is not JSON: %v", what, got, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func testLogs(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{})
	j := e.claim(t, nil, nil, time.Minute)
	steps := []struct {
		offset int64
		chunk  string
		want   int64 // new length, or Have on mismatch
		miss   bool
	}{
		{0, "starting engine\n", 16, false},
		{0, "starting engine\n", 16, true}, // a retried chunk that already landed
		{20, "gap", 16, true},              // a chunk from the future
		{16, "ready\n", 22, false},
		{22, "", 22, false},
		{22, "warmup 500\n", 33, false},
	}
	for i, s := range steps {
		n, err := e.st.AppendLog(e.ctx, j.ID, j.LeaseID, s.offset, []byte(s.chunk))
		var om store.ErrOffsetMismatch
		switch {
		case s.miss && !errors.As(err, &om):
			t.Fatalf("step %d: err = %v, want ErrOffsetMismatch", i, err)
		case s.miss && om.Have != s.want:
			t.Fatalf("step %d: Have = %d, want %d", i, om.Have, s.want)
		case !s.miss && (err != nil || n != s.want):
			t.Fatalf("step %d: length %d err %v, want %d", i, n, err, s.want)
		}
	}
	want := "starting engine\nready\nwarmup 500\n"
	if got, err := e.st.ReadLog(e.ctx, j.ID, 0); err != nil || string(got) != want {
		t.Fatalf("log = %q, %v; want %q", got, err, want)
	}
	// The next attempt writes its own log from offset 0.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	j2 := e.claim(t, nil, nil, time.Minute)
	if n, err := e.st.AppendLog(e.ctx, j2.ID, j2.LeaseID, 0, []byte("attempt 2\n")); err != nil || n != 10 {
		t.Fatalf("attempt 2 append = %d, %v", n, err)
	}
	if got, _ := e.st.ReadLog(e.ctx, j.ID, 0); string(got) != "attempt 2\n" {
		t.Errorf("latest log = %q", got)
	}
	if got, _ := e.st.ReadLog(e.ctx, j.ID, 1); string(got) != want {
		t.Errorf("attempt 1 log = %q, want %q", got, want)
	}
}

func testSupersede(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	const oldSHA, newSHA = "0000000000000000000000000000000000000001", "0000000000000000000000000000000000000002"
	running := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: oldSHA, Tier: "quick"})
	claimed := e.claim(t, nil, nil, time.Minute)
	if claimed.ID != running.ID {
		t.Fatal("claimed the wrong job")
	}
	queued := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: oldSHA, Tier: "merge"})
	current := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: newSHA})
	otherPR := e.enqueue(t, store.JobSpec{PRNumber: 8, HeadSHA: oldSHA})
	otherRepo := e.enqueue(t, store.JobSpec{Repo: "acme/other", PRNumber: 7, HeadSHA: oldSHA})

	sup, err := e.st.CancelSuperseded(e.ctx, "acme/llm", 7, newSHA)
	if err != nil {
		t.Fatal(err)
	}
	if len(sup.Cancelled) != 1 || sup.Cancelled[0].ID != queued.ID || sup.Cancelled[0].Status != jobstate.Cancelled {
		t.Errorf("cancelled = %+v, want job %d", sup.Cancelled, queued.ID)
	}
	if len(sup.Signalled) != 1 || sup.Signalled[0].ID != running.ID || !sup.Signalled[0].CancelRequested {
		t.Errorf("signalled = %+v, want job %d", sup.Signalled, running.ID)
	}
	for _, id := range []int64{current.ID, otherPR.ID, otherRepo.ID} {
		if j, _ := e.st.GetJob(e.ctx, id); j.Status != jobstate.Queued || j.CancelRequested {
			t.Errorf("job %d touched by supersede: %s", id, j.Status)
		}
	}
	cancel, err := e.st.Heartbeat(e.ctx, claimed.ID, claimed.LeaseID, time.Minute)
	if err != nil || !cancel {
		t.Errorf("heartbeat after supersede = %v, %v; want cancel", cancel, err)
	}
	// Superseding again changes nothing and says so.
	if again, err := e.st.CancelSuperseded(e.ctx, "acme/llm", 7, newSHA); err != nil || len(again.Cancelled)+len(again.Signalled) != 0 {
		t.Errorf("second supersede = %+v, %v", again, err)
	}
	// An agent that dies after being told to stop is not retried.
	e.clock.Advance(2 * time.Minute)
	reaped, err := e.st.ReapExpired(e.ctx)
	if err != nil || len(reaped) != 1 || reaped[0].Status != jobstate.Cancelled {
		t.Errorf("reap signalled job = %+v, %v; want cancelled", reaped, err)
	}
	audit, _ := e.st.ListAudit(e.ctx, "acme/llm", 7)
	if len(audit) == 0 || audit[0].Action != "jobs.superseded" {
		t.Errorf("audit = %+v, want jobs.superseded first", audit)
	}
}

func testCancelJob(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	run := e.enqueue(t, store.JobSpec{})
	claimed := e.claim(t, nil, nil, time.Minute)
	q := e.enqueue(t, store.JobSpec{})
	if j, err := e.st.CancelJob(e.ctx, q.ID, "fork PR"); err != nil || j.Status != jobstate.Cancelled || j.FailureReason != "fork PR" {
		t.Errorf("cancel queued = %+v, %v", j, err)
	}
	if j, err := e.st.CancelJob(e.ctx, run.ID, "stop"); err != nil || j.Status != jobstate.Running || !j.CancelRequested {
		t.Errorf("cancel running = %+v, %v", j, err)
	}
	if _, err := e.st.Finish(e.ctx, claimed.ID, claimed.LeaseID, jobstate.Cancelled, "cancelled on request"); err != nil {
		t.Errorf("finish cancelled: %v", err)
	}
	if _, err := e.st.CancelJob(e.ctx, 987654, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel missing: %v, want ErrNotFound", err)
	}
}

func testNotify(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	ch := e.st.Notify()
	select {
	case <-ch:
		t.Fatal("notified before any enqueue")
	default:
	}
	e.enqueue(t, store.JobSpec{})
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("enqueue did not wake the waiter")
	}
	// A requeue is new work too.
	e.claim(t, nil, nil, time.Minute)
	ch = e.st.Notify()
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("requeue did not wake the waiter")
	}
}

func testCheckRuns(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	deadline := e.clock.Now().Add(48 * time.Hour)
	c, err := e.st.PutCheckRun(e.ctx, store.CheckRun{Repo: "acme/llm", HeadSHA: sha1, Tier: "quick", PRNumber: 7,
		InstallationID: 42, GitHubID: 555, JobIDs: []int64{1, 2}, State: store.CheckQueued})
	if err != nil {
		t.Fatal(err)
	}
	c.State, c.Verdict, c.Deadline = store.CheckWarned, json.RawMessage(`{"regression": true}`), deadline
	if c, err = e.st.PutCheckRun(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.GetCheckRun(e.ctx, "acme/llm", sha1, "quick")
	if err != nil || got.ID != c.ID || got.State != store.CheckWarned || !got.Deadline.Equal(deadline) ||
		fmt.Sprint(got.JobIDs) != "[1 2]" || got.GitHubID != 555 || got.InstallationID != 42 {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if byGH, err := e.st.CheckRunByGitHubID(e.ctx, 555); err != nil || byGH.ID != c.ID {
		t.Errorf("by GitHub ID = %+v, %v", byGH, err)
	}
	// A new push: its own row, its own clock; the old SHA's row is untouched.
	if _, err := e.st.PutCheckRun(e.ctx, store.CheckRun{Repo: "acme/llm", HeadSHA: sha2, Tier: "quick", PRNumber: 7,
		State: store.CheckWarned, Deadline: deadline.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if runs, err := e.st.ListCheckRuns(e.ctx, "acme/llm", 7); err != nil || len(runs) != 2 {
		t.Errorf("PR check runs = %d, %v; want 2", len(runs), err)
	}

	due := func() []string {
		t.Helper()
		rs, err := e.st.DueCheckRuns(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.HeadSHA[:1])
		}
		return out
	}
	if d := due(); len(d) != 0 {
		t.Errorf("due at start = %v", d)
	}
	e.clock.Advance(48*time.Hour - time.Second)
	if d := due(); len(d) != 0 {
		t.Errorf("due a second early = %v", d)
	}
	e.clock.Advance(time.Second)
	if d := due(); fmt.Sprint(d) != "[1]" {
		t.Errorf("due at 48 h = %v, want [1]", d)
	}
	e.clock.Advance(time.Hour)
	if d := due(); fmt.Sprint(d) != "[1 2]" {
		t.Errorf("due at 49 h = %v, want [1 2] (earliest first)", d)
	}
	// Two replicas race to escalate: exactly one wins.
	other := e.open(t)
	wins := 0
	for _, st := range []store.Store{e.st, other} {
		ok, err := st.TransitionCheckRun(e.ctx, c.ID, store.CheckWarned, store.CheckTransition{State: store.CheckEscalated})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			wins++
		}
	}
	if wins != 1 {
		t.Errorf("escalation won %d times, want 1", wins)
	}
	esc, _ := e.st.GetCheckRun(e.ctx, "acme/llm", sha1, "quick")
	if esc.State != store.CheckEscalated || !esc.Deadline.IsZero() {
		t.Errorf("escalated = state %s deadline %v", esc.State, esc.Deadline)
	}
	assertJSON(t, "verdict kept by transition", esc.Verdict, `{"regression": true}`)
	if d := due(); fmt.Sprint(d) != "[2]" {
		t.Errorf("due after escalation = %v, want [2]", d)
	}
	if _, err := e.st.GetCheckRun(e.ctx, "acme/llm", sha1, "merge"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing tier: %v, want ErrNotFound", err)
	}
}

func testBaselines(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	put := func(key, commit string, version int) (store.Baseline, error) {
		e.clock.Advance(time.Minute)
		return e.st.PutBaseline(e.ctx, store.Baseline{Repo: "acme/llm", Key: key, Version: version, Commit: commit,
			ImageDigest: "sha256:abc", GPU: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-a", Driver: "550.54.15",
			LoadParams: json.RawMessage(`{"request_rate": 8}`), Runs: json.RawMessage(`[{"output_throughput": 1000}]`),
			PromotedBy: "octocat", Reason: "release v1.2", AllowLower: commit == "c2"})
	}
	v1, err := put("llama-8b-tp8", "c1", 0)
	if err != nil || v1.Version != 1 {
		t.Fatalf("first put = %+v, %v", v1, err)
	}
	v2, err := put("llama-8b-tp8", "c2", 0)
	if err != nil || v2.Version != 2 {
		t.Fatalf("second put = %+v, %v", v2, err)
	}
	if _, err := put("mixtral-tp8", "m1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := put("llama-8b-tp8", "dup", 2); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate version: %v, want ErrConflict", err)
	}
	latest, err := e.st.LatestBaseline(e.ctx, "acme/llm", "llama-8b-tp8")
	if err != nil || latest.ID != v2.ID || latest.Commit != "c2" || !latest.AllowLower || latest.GPUUUID != "GPU-a" {
		t.Errorf("latest = %+v, %v", latest, err)
	}
	assertJSON(t, "runs", latest.Runs, `[{"output_throughput": 1000}]`)
	hist, err := e.st.BaselineHistory(e.ctx, "acme/llm", "llama-8b-tp8")
	if err != nil || len(hist) != 2 || hist[0].Version != 2 || hist[1].Version != 1 {
		t.Errorf("history = %+v, %v", hist, err)
	}
	list, err := e.st.ListBaselines(e.ctx, "acme/llm")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, b := range list {
		keys = append(keys, fmt.Sprintf("%s@%d", b.Key, b.Version))
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[llama-8b-tp8@2 mixtral-tp8@1]" {
		t.Errorf("list = %v, want the latest of each key", keys)
	}
	if got, err := e.st.GetBaseline(e.ctx, v1.ID); err != nil || got.Commit != "c1" || got.PromotedBy != "octocat" {
		t.Errorf("get v1 = %+v, %v", got, err)
	}
	if _, err := e.st.LatestBaseline(e.ctx, "acme/llm", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
}

func testAppeals(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	a, err := e.st.CreateAppeal(e.ctx, store.Appeal{Repo: "acme/llm", PRNumber: 7, HeadSHA: "abc", Author: "alice",
		Reason: "noisy neighbour on the runner"})
	if err != nil || a.Status != store.AppealOpen {
		t.Fatalf("create = %+v, %v", a, err)
	}
	e.clock.Advance(time.Hour)
	d, err := e.st.DecideAppeal(e.ctx, a.ID, store.AppealAccepted, "maintainer")
	if err != nil || d.Status != store.AppealAccepted || d.DecidedBy != "maintainer" || !d.DecidedAt.Equal(e.clock.Now()) {
		t.Fatalf("decide = %+v, %v", d, err)
	}
	if _, err := e.st.DecideAppeal(e.ctx, a.ID, store.AppealRejected, "other"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second decision: %v, want ErrConflict", err)
	}
	if _, err := e.st.DecideAppeal(e.ctx, 99999, store.AppealRejected, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("decide missing: %v, want ErrNotFound", err)
	}
	if _, err := e.st.DecideAppeal(e.ctx, a.ID, store.AppealOpen, "x"); err == nil {
		t.Error("decide to open accepted")
	}
	list, err := e.st.ListAppeals(e.ctx, "acme/llm", 7)
	if err != nil || len(list) != 1 || list[0].Reason != "noisy neighbour on the runner" || list[0].Status != store.AppealAccepted {
		t.Errorf("list = %+v, %v", list, err)
	}
}

func testApprovals(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	const sha = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"
	if _, err := e.st.GetApproval(e.ctx, "acme/llm", sha); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approval before any: %v, want ErrNotFound", err)
	}
	if _, _, err := e.st.ApproveCommit(e.ctx, store.Approval{Repo: "acme/llm", HeadSHA: sha[:7], By: "maint"}); err == nil {
		t.Error("an approval of a short SHA was stored: it must name one commit")
	}
	a, created, err := e.st.ApproveCommit(e.ctx, store.Approval{Repo: "acme/llm", HeadSHA: strings.ToUpper(sha), PRNumber: 7, By: "maint", Role: "maintain", Via: "/perf approve"})
	if err != nil || !created || a.HeadSHA != sha || a.By != "maint" || !a.CreatedAt.Equal(e.clock.Now()) {
		t.Fatalf("approve = %+v, %v, %v", a, created, err)
	}
	e.clock.Advance(time.Minute)
	again, created, err := e.st.ApproveCommit(e.ctx, store.Approval{Repo: "acme/llm", HeadSHA: sha, PRNumber: 7, By: "other", Via: "button"})
	if err != nil || created || again.By != "maint" || !again.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("second approval = %+v, %v, %v; want the first kept", again, created, err)
	}
	got, err := e.st.GetApproval(e.ctx, "acme/llm", sha)
	if err != nil || got != a {
		t.Errorf("get = %+v, %v; want %+v", got, err, a)
	}
	if _, err := e.st.GetApproval(e.ctx, "acme/other", sha); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approval leaks across repositories: %v", err)
	}
	audit, err := e.st.ListAudit(e.ctx, "acme/llm", 7)
	if err != nil || len(audit) != 1 || audit[0].Action != "commit.approved" || audit[0].Actor != "maint" {
		t.Errorf("audit = %+v, %v; want one commit.approved by maint", audit, err)
	}
}

func testAudit(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	entries := []store.AuditEntry{
		{Actor: "alice", Action: "appeal.opened", Repo: "acme/llm", PRNumber: 7, Detail: json.RawMessage(`{"reason":"noise"}`)},
		{Actor: "bob", Action: "retest", Repo: "acme/llm", PRNumber: 8},
		{Actor: "maint", Action: "appeal.accepted", Repo: "acme/llm", PRNumber: 7},
		{Actor: "x", Action: "retest", Repo: "acme/other", PRNumber: 7},
	}
	for _, en := range entries {
		e.clock.Advance(time.Second)
		got, err := e.st.AppendAudit(e.ctx, en)
		if err != nil || got.ID == 0 || !got.CreatedAt.Equal(e.clock.Now()) {
			t.Fatalf("append = %+v, %v", got, err)
		}
	}
	pr7, err := e.st.ListAudit(e.ctx, "acme/llm", 7)
	if err != nil || len(pr7) != 2 || pr7[0].Action != "appeal.opened" || pr7[1].Action != "appeal.accepted" {
		t.Fatalf("PR 7 = %+v, %v", pr7, err)
	}
	assertJSON(t, "detail", pr7[0].Detail, `{"reason":"noise"}`)
	if repo, err := e.st.ListAudit(e.ctx, "acme/llm", 0); err != nil || len(repo) != 3 {
		t.Errorf("repo audit = %d entries, %v; want 3", len(repo), err)
	}
	if _, err := e.st.AppendAudit(e.ctx, store.AuditEntry{Action: "x"}); err == nil {
		t.Error("audit entry without actor accepted")
	}
}

func testTrend(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	day := time.Date(2025, 3, 1, 3, 0, 0, 0, time.UTC)
	for i, v := range []float64{100, 101, 99} {
		if err := e.st.PutTrend(e.ctx, store.TrendPoint{Repo: "acme/llm", Key: "llama", Metric: "output_throughput",
			Date: day.AddDate(0, 0, i), Value: v, JobID: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// A re-run of the same night replaces that night's value.
	if err := e.st.PutTrend(e.ctx, store.TrendPoint{Repo: "acme/llm", Key: "llama", Metric: "output_throughput",
		Date: day.AddDate(0, 0, 2).Add(5 * time.Hour), Value: 98.5, JobID: 9}); err != nil {
		t.Fatal(err)
	}
	pts, err := e.st.ListTrend(e.ctx, "acme/llm", "llama", "output_throughput", day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pts {
		got = append(got, fmt.Sprintf("%s=%g#%d", p.Date.Format("01-02"), p.Value, p.JobID))
	}
	if fmt.Sprint(got) != "[03-02=101#2 03-03=98.5#9]" {
		t.Errorf("trend = %v", got)
	}
}
