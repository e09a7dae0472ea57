package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const (
	testRepo  = "acme/inference"
	testToken = "test-registration-token-0123456789"
)

// scale is the test's time scale: every backoff and GitHub outage runs at
// 1/20 of production time (a 30 s outage lasts 1.5 s), so the loop's
// behaviour is the same and the test takes seconds.
const scale = 20

// fastLoop is the workers' timing, scaled.
func fastLoop() LoopConfig {
	p := backoff.Policy{Base: time.Second / scale, Max: 10 * time.Second / scale}
	return LoopConfig{
		Poll: 20 * time.Millisecond, InboxLease: 3 * time.Second, OutboxLease: 3 * time.Second,
		InboxPolicy: p, OutboxPolicy: p, JudgePolicy: backoff.Policy{Base: p.Base, Max: p.Max, MaxAttempts: 8},
		GitHubRetry:    app.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxRateLimitWait: time.Second},
		ReconcileEvery: time.Second, StartSyncEvery: 50 * time.Millisecond,
	}
}

// loop is a running server over a store file, the fake GitHub, and a
// runner that measures every job it can claim.
type loop struct {
	t      testing.TB
	gh     *githubtest.Server
	dsn    string
	st     store.Store
	srv    *Server
	url    string
	stop   func()
	prs    map[int]string // PR number → head SHA
	runner context.CancelFunc
	tune   func(*LoopConfig) // a test's own loop settings, on top of fastLoop
	// instance names the server in its leases (store.WithInstance).
	instance string
}

func newLoop(t *testing.T) *loop {
	t.Helper()
	return newTunedLoop(t, nil)
}

// newTunedLoop is newLoop with tune applied to the loop settings.
func newTunedLoop(t *testing.T, tune func(*LoopConfig)) *loop {
	t.Helper()
	l := &loop{t: t, gh: ghtest.New(t), dsn: filepath.Join(t.TempDir(), "perfgate.db"), prs: map[int]string{}, tune: tune}
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# the defaults\n"))
	l.start()
	t.Cleanup(func() { l.kill() })
	return l
}

// start opens the store and starts the server and its workers.
func (l *loop) start() {
	l.t.Helper()
	st, err := store.Open(context.Background(), l.dsn, store.WithInstance(l.instance))
	if err != nil {
		l.t.Fatal(err)
	}
	cfg := Config{GitHub: l.gh.AppConfig(), AgentRegistrationToken: testToken, AppSlug: githubtest.AppSlug, Loop: fastLoop()}
	if l.tune != nil {
		l.tune(&cfg.Loop)
	}
	srv, err := New(cfg, st, zerolog.New(zerolog.NewTestWriter(l.t)).Level(zerolog.ErrorLevel), nil)
	if err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.RunBackground(ctx); err != nil {
		l.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(srv.Listener(ln))
	l.st, l.srv, l.url = st, srv, "http://"+ln.Addr().String()
	l.stop = func() { cancel(); _ = srv.Wait(); hs.Close(); st.Close() }
}

// kill stops the server where it stands: its workers' contexts end
// mid-call, its connections close, its store closes.
func (l *loop) kill() {
	if l.runner != nil {
		l.runner()
		l.runner = nil
	}
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
}

// addPR makes PR n (touching model/) known to the fake GitHub and returns
// its opened event.
func (l *loop) addPR(n int) []byte {
	l.t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(ghtest.Fixture(l.t, "pull_request/opened.json"), &ev); err != nil {
		l.t.Fatal(err)
	}
	sha := fmt.Sprintf("%040x", 0xabc000+n)
	pr := ev["pull_request"].(map[string]any)
	pr["number"], ev["number"] = n, n
	pr["head"].(map[string]any)["sha"] = sha
	raw, err := json.Marshal(pr)
	if err != nil {
		l.t.Fatal(err)
	}
	l.gh.SetPullRequest(testRepo, n, raw)
	l.gh.SetFiles(testRepo, n, []githubtest.File{{Filename: "model/attention.py"}})
	l.prs[n] = sha
	body, err := json.Marshal(ev)
	if err != nil {
		l.t.Fatal(err)
	}
	return body
}

// deliver posts a signed delivery and returns the status.
func (l *loop) deliver(event, id string, body []byte) int {
	l.t.Helper()
	req, err := githubtest.NewDelivery(l.url+app.WebhookPath, event, id, body, []byte(githubtest.WebhookSecret))
	if err != nil {
		l.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runJobs measures every job the runner can claim (three verified runs
// each) until stopped.
func (l *loop) runJobs() {
	ctx, cancel := context.WithCancel(context.Background())
	l.runner = cancel
	st := l.st
	go func() {
		ag, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("runner-token")})
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			j, err := st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: []string{"gpu"}, Lease: time.Minute})
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for i, r := range verifiedRuns(3, uint64(j.ID)) {
				raw, _ := json.Marshal(r)
				if _, _, err := st.PutResult(ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprint(i),
					RunIndex: i, Kind: jobstate.KindMeasured, Summary: raw, Samples: raw}); err != nil {
					break
				}
			}
			if _, err := st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err == nil {
				l.srv.Dispatch().JobDone(ctx, j)
			}
		}
	}()
}

func (l *loop) promoteBaseline() {
	l.t.Helper()
	tier, _ := config.Default().Tier("quick")
	if _, _, err := baseline.Promote(context.Background(), l.st, verifiedRuns(5, 99),
		baseline.Meta{Repo: testRepo, Key: "quick", Version: "v1", Commit: strings.Repeat("b", 40), By: "t"}, tier); err != nil {
		l.t.Fatal(err)
	}
}

// waitChecks waits until every PR's head has a completed check (or, with
// completed false, any check), then returns the check runs by head SHA.
// within is what that takes on an idle machine: a slower wait is logged;
// only the test's deadline fails it.
func (l *loop) waitChecks(completed bool, within time.Duration) map[string][]githubtest.CheckRun {
	l.t.Helper()
	start := time.Now()
	ctx := poll.Context(l.t)
	for {
		by := map[string][]githubtest.CheckRun{}
		for _, c := range l.gh.CheckRuns() {
			by[c.HeadSHA] = append(by[c.HeadSHA], c)
		}
		done := 0
		for _, sha := range l.prs {
			for _, c := range by[sha] {
				if !completed || c.Status == "completed" {
					done++
					break
				}
			}
		}
		if done == len(l.prs) {
			if took := time.Since(start); took > within {
				l.t.Logf("the checks took %v (%v on an idle machine)", took.Round(time.Millisecond), within)
			}
			return by
		}
		select {
		case <-ctx.Done():
			l.t.Fatalf("after %v: %d of %d PRs have their check", time.Since(start).Round(time.Millisecond), done, len(l.prs))
		case <-time.After(poll.Interval):
		}
	}
}

// waitSettled waits until the inbox has processed every PR's delivery and
// the outbox holds no pending write: nothing is left to change the checks.
func (l *loop) waitSettled() {
	l.t.Helper()
	ctx := context.Background()
	poll.Until(l.t, "the inbox and the outbox to settle", func() bool {
		counts, err := l.st.CountDeliveries(ctx)
		if err != nil || counts[store.DeliveryPending] != 0 || counts[store.DeliveryDone]+counts[store.DeliveryFailed] < len(l.prs) {
			return false
		}
		pending, err := l.st.ListEffects(ctx, store.EffectFilter{Status: store.EffectPending})
		return err == nil && len(pending) == 0
	})
}

// verifiedRuns are n runs of one engine, with the metadata the gate and
// the baseline rules need, and 1% run-to-run noise.
func verifiedRuns(n int, seed uint64) []*result.Result {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]*result.Result, n)
	for i := range out {
		r := &result.Result{Completed: 100, Duration: 25, Metrics: map[string]float64{}, RequestRate: result.Inf,
			Perfgate: &result.Section{SchemaVersion: result.SchemaVersion,
				Environment: result.Environment{GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-5f3e2d1c-0b9a-8f7e-6d5c-4b3a2f1e0d9c",
					Driver: "550.54.15", CUDA: "12.4", EngineImage: "vllm/vllm-openai@sha256:" + strings.Repeat("ab", 32), Commit: strings.Repeat("b", 40)},
				Load:        result.Load{Endpoint: "/v1/completions", Model: "m", Dataset: "random", NumPrompts: 100, RequestRate: result.Inf, Burstiness: 1},
				DatasetHash: strings.Repeat("9b", 32)}}
		for k, v := range map[string]float64{"p99_ttft_ms": 200, "median_ttft_ms": 120, "p90_ttft_ms": 180, "p99_tpot_ms": 12, "median_tpot_ms": 10,
			"p90_tpot_ms": 11, "p99_itl_ms": 15, "median_itl_ms": 10, "p99_e2el_ms": 1500, "median_e2el_ms": 1200} {
			r.Metrics[k] = v * math.Exp(0.01*rng.NormFloat64())
		}
		r.OutputThroughput = 5000 * math.Exp(0.01*rng.NormFloat64())
		r.RequestThroughput = 40 * math.Exp(0.01*rng.NormFloat64())
		out[i] = r
	}
	return out
}

// One check per PR head, completed; and nothing left in the inbox or the
// outbox.
func (l *loop) assertOneCompletedCheckEach(by map[string][]githubtest.CheckRun) {
	l.t.Helper()
	for n, sha := range l.prs {
		runs := by[sha]
		if len(runs) != 1 {
			l.t.Errorf("PR #%d has %d check runs, want exactly 1", n, len(runs))
			continue
		}
		if runs[0].Status != "completed" || runs[0].Conclusion != "success" {
			l.t.Errorf("PR #%d: %s/%s %q", n, runs[0].Status, runs[0].Conclusion, runs[0].Title)
		}
	}
	ctx := context.Background()
	counts, err := l.st.CountDeliveries(ctx)
	if err != nil || counts[store.DeliveryPending] != 0 || counts[store.DeliveryFailed] != 0 || counts[store.DeliveryDone] != len(l.prs) {
		l.t.Errorf("inbox: %v %v, want all %d done", counts, err, len(l.prs))
	}
	pending, err := l.st.ListEffects(ctx, store.EffectFilter{Status: store.EffectPending})
	if err != nil || len(pending) != 0 {
		l.t.Errorf("outbox still holds %d writes: %v", len(pending), err)
	}
}

// 50 deliveries while GitHub answers 502 to everything (token requests
// included), then recovers: every delivery is stored and answered 202
// while GitHub is still down, every PR ends with one completed check, none
// twice. The outage lasts until every delivery is answered and the loop
// has met it, so a delivery that waited for GitHub would never be answered
// however fast or slow the machine is.
func TestGitHubOutageLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 50 PRs through the whole loop (a few seconds)")
	}
	l := newLoop(t)
	l.promoteBaseline()
	l.runJobs()
	var events [][]byte
	for n := 1; n <= 50; n++ {
		events = append(events, l.addPR(100+n))
	}
	l.gh.FailAllFor(http.StatusBadGateway, time.Hour, nil)
	var wg sync.WaitGroup
	for i, body := range events {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := l.deliver("pull_request", fmt.Sprintf("outage-%d", i), body); code != http.StatusAccepted {
				t.Errorf("delivery %d answered %d during the outage, want 202", i, code)
			}
		}()
	}
	wg.Wait()
	failed := func() int {
		n := 0
		for _, r := range l.gh.Requests() {
			if r.Status == http.StatusBadGateway {
				n++
			}
		}
		return n
	}
	poll.Until(t, "a call to meet the outage", func() bool { return failed() > 0 })
	l.gh.EndOutage()
	by := l.waitChecks(true, 60*time.Second)
	l.waitSettled()
	l.assertOneCompletedCheckEach(by)
}

// A server killed mid-processing — deliveries stored, handlers and GitHub
// writes half done during an outage — resumes after a real restart on the
// same database file: every PR gets its one check.
func TestKilledServerResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server")
	}
	l := newLoop(t)
	l.promoteBaseline()
	var events [][]byte
	for n := 1; n <= 10; n++ {
		events = append(events, l.addPR(200+n))
	}
	l.gh.FailAllFor(http.StatusBadGateway, time.Hour, nil)
	for i, body := range events[:5] {
		if code := l.deliver("pull_request", fmt.Sprintf("kill-%d", i), body); code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d", i, code)
		}
	}
	// Let GitHub come back for a moment, so some handlers get through and
	// others are mid-retry when the server dies.
	time.Sleep(100 * time.Millisecond)
	l.gh.EndOutage()
	time.Sleep(30 * time.Millisecond)
	l.gh.FailAllFor(http.StatusBadGateway, time.Hour, nil)
	for i, body := range events[5:] {
		if code := l.deliver("pull_request", fmt.Sprintf("kill-%d", 5+i), body); code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d", 5+i, code)
		}
	}
	l.kill()

	l.gh.EndOutage()
	l.start()
	l.runJobs()
	by := l.waitChecks(true, 60*time.Second)
	l.waitSettled()
	l.assertOneCompletedCheckEach(by)
}

// A redelivery (GitHub's "Redeliver") of a delivery that failed is
// processed; of one that succeeded, it is acknowledged and not processed.
func TestRedeliveryOfFailedAndSucceeded(t *testing.T) {
	l := newLoop(t)
	body := l.addPR(301)
	// GitHub says the PR's files do not exist: a refusal retrying cannot
	// fix, so the delivery fails.
	l.gh.FailNext("GET", "/repos/acme/inference/pulls/301/files", 1, http.StatusNotFound, nil)
	if code := l.deliver("pull_request", "redeliver-1", body); code != http.StatusAccepted {
		t.Fatalf("first delivery: %d", code)
	}
	waitDelivery(t, l.st, "redeliver-1", store.DeliveryFailed)
	if n := len(l.gh.CheckRuns()); n != 0 {
		t.Fatalf("%d checks from a failed delivery", n)
	}
	if code := l.deliver("pull_request", "redeliver-1", body); code != http.StatusAccepted {
		t.Fatalf("redelivery of the failed delivery: %d, want 202", code)
	}
	waitDelivery(t, l.st, "redeliver-1", store.DeliveryDone)
	l.waitChecks(false, 10*time.Second)

	if code := l.deliver("pull_request", "redeliver-1", body); code != http.StatusOK {
		t.Errorf("redelivery of the processed delivery: %d, want 200 (duplicate)", code)
	}
	l.waitSettled()
	if runs := l.gh.CheckRuns(); len(runs) != 1 {
		t.Errorf("%d check runs, want 1: the duplicate was processed", len(runs))
	}
	if d, _ := l.st.GetDelivery(context.Background(), "redeliver-1"); d.Redeliveries != 1 || d.Status != store.DeliveryDone {
		t.Errorf("after the duplicate: %+v, want done with the one redelivery that was processed", d)
	}
}

func waitDelivery(t *testing.T, st store.Store, id string, want store.DeliveryStatus) {
	t.Helper()
	if poll.UntilContext(poll.Context(t), func() bool {
		d, err := st.GetDelivery(context.Background(), id)
		return err == nil && d.Status == want
	}) == nil {
		return
	}
	d, err := st.GetDelivery(context.Background(), id)
	t.Fatalf("delivery %s: %s after %d attempts (lease %q, last error %q) %v, want %s", id, d.Status, d.Attempts, d.LeaseID, d.LastError, err, want)
}

// A server killed while it processes a delivery, restarted under the same
// instance name, takes the delivery up at once instead of after its
// 3-minute lease lapses. (On main the lease held it for 3 minutes.)
func TestRestartReclaimsItsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server")
	}
	l := &loop{t: t, gh: ghtest.New(t), dsn: filepath.Join(t.TempDir(), "perfgate.db"), prs: map[int]string{}, instance: "perfgate-0",
		tune: func(c *LoopConfig) { c.InboxLease, c.OutboxLease = 3*time.Minute, 2*time.Minute }}
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# the defaults\n"))
	l.start()
	t.Cleanup(func() { l.kill() })
	release := l.gh.StallAll() // GitHub hangs: the handler is mid-call when the server dies
	defer release()
	if code := l.deliver("pull_request", "crash-1", l.addPR(301)); code != http.StatusAccepted {
		t.Fatalf("delivery: %d", code)
	}
	for {
		d, err := l.st.GetDelivery(context.Background(), "crash-1")
		if err == nil && d.Attempts > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.kill()
	release()
	restarted := time.Now()
	l.start()
	waitDelivery(t, l.st, "crash-1", store.DeliveryDone)
	t.Logf("delivery claimed at the kill processed %v after the restart (its lease: 3m)", time.Since(restarted).Round(time.Millisecond))
}
