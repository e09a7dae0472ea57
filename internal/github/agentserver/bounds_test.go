package agentserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// claimedJob enqueues a job with plan, claims it as a new agent and
// returns the agent's token and the claim.
func claimedJob(t *testing.T, st store.Store, ts *httptest.Server, name string, plan agentapi.Plan, kind string) (string, agentapi.ClaimResponse) {
	t.Helper()
	a := register(t, ts, name)
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Kind: kind, Repo: "o/r", HeadSHA: "abc123", Labels: []string{"gpu"},
		GPUUUID: "GPU-" + name, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	return a.Token, c
}

func quickPlan(t *testing.T) agentapi.Plan {
	t.Helper()
	p, err := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// with returns sampleResult with field set to v.
func with(fields map[string]any) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(sampleResult(), &m)
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// TestResultsCheckedAgainstThePlan: a result the job's plan could not have
// produced is refused (the completed = 2^62 beside 2 TTFTs,
// median_ttft_ms = 1e308), and a body bigger than the plan's requests can
// make is refused before it is read.
func TestResultsCheckedAgainstThePlan(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	plan := quickPlan(t)
	tok, c := claimedJob(t, st, ts, "a", plan, "")
	jp := fmt.Sprintf("/api/v1/jobs/%d/results", c.JobID)
	for i, tc := range []struct {
		name string
		res  json.RawMessage
		want string
	}{
		{"completed 2^62 with 2 TTFTs", with(map[string]any{"completed": int64(1) << 62}), "the plan sends"},
		{"more requests than the plan", with(map[string]any{"completed": plan.Workload.NumPrompts + 1}), "the plan sends"},
		{"median TTFT 1e308 ms", with(map[string]any{"median_ttft_ms": 1e308}), "median_ttft_ms is 1e+308 ms: over a day"},
		{"throughput 1e300", with(map[string]any{"output_throughput": 1e300}), "output_throughput is 1e+300"},
		{"3 TTFTs for 2 requests", with(map[string]any{"ttfts": []float64{0.1, 0.2, 0.3}}), "ttfts has 3 entries for 2 completed"},
		{"1 ITL list for 2 requests", with(map[string]any{"itls": [][]float64{{0.01}}}), "itls has 1 entries for 2 completed"},
	} {
		req := agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "k" + strconv.Itoa(i), Kind: "measured", Result: tc.res}
		var eb agentapi.ErrorBody
		if code := call(t, ts, tok, jp, req, &eb); code != 400 || !strings.Contains(eb.Error, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.name, code, eb.Error, tc.want)
		}
	}
	// A body past what the plan's requests can fill: 413 before reading.
	huge := bytes.Repeat([]byte(" "), 64<<20)
	var eb agentapi.ErrorBody
	if code := call(t, ts, tok, jp, huge, &eb); code != 413 || !strings.Contains(eb.Error, "produce at most") {
		t.Errorf("64 MiB result for a %d-request plan: %d %q, want 413", plan.Workload.NumPrompts, code, eb.Error)
	}
	if rs, _ := st.ListResults(context.Background(), c.JobID); len(rs) != 0 {
		t.Errorf("refused uploads stored %d results", len(rs))
	}
}

// TestResultBudget: while one upload holds the decoding budget, another
// waits, then is answered 503 with Retry-After; once the first is done the
// second goes through.
func TestResultBudget(t *testing.T) {
	plan := quickPlan(t)
	body, _ := json.Marshal(agentapi.ResultRequest{IdempotencyKey: "k", Kind: "measured", Result: sampleResult()})
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second, ResultBudget: int64(len(body)) + 200, ResultWait: 50 * time.Millisecond})
	tokA, ca := claimedJob(t, st, ts, "a", plan, "")
	tokB, cb := claimedJob(t, st, ts, "b", plan, "")
	post := func(tok string, c agentapi.ClaimResponse, r io.Reader, n int64) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/jobs/%d/results", ts.URL, c.JobID), r)
		req.ContentLength = n
		req.Header.Set("Authorization", "Bearer "+tok)
		return ts.Client().Do(req)
	}
	reqA, _ := json.Marshal(agentapi.ResultRequest{LeaseID: ca.LeaseID, IdempotencyKey: "a0", Kind: "measured", Result: sampleResult()})
	pr, pw := io.Pipe()
	taken := make(chan struct{}, 4)
	defer agentserver.OnResultTaken(func() { taken <- struct{}{} })()
	first := make(chan int, 1)
	go func() {
		resp, err := post(tokA, ca, pr, int64(len(reqA)))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Wait until the server holds the first upload's share.
	<-taken
	reqB, _ := json.Marshal(agentapi.ResultRequest{LeaseID: cb.LeaseID, IdempotencyKey: "b0", Kind: "measured", Result: sampleResult()})
	resp, err := post(tokB, cb, bytes.NewReader(reqB), int64(len(reqB)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("upload while the budget is held: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := pw.Write(reqA); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-first; code != 201 {
		t.Fatalf("first upload: %d", code)
	}
	resp, err = post(tokB, cb, bytes.NewReader(reqB), int64(len(reqB)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("upload after the budget was freed: %d, want 201", resp.StatusCode)
	}
}

// TestArtifactJobBudget: one job's artifacts together stay within its
// budget (the 16 × 16 MiB for one job).
func TestArtifactJobBudget(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(agentserver.NewServer(st, agentserver.Options{RegistrationToken: regToken, Lease: time.Minute,
		ArtifactFiles: dir, ArtifactRows: st, ArtifactJobBytes: 2000}))
	defer ts.Close()
	tok, c := claimedJob(t, st, ts, "a", quickPlan(t), agentapi.KindProfile)
	client, err := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: tok, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for i := range 4 {
		f := filepath.Join(t.TempDir(), "trace.json")
		if err := os.WriteFile(f, bytes.Repeat([]byte{byte('a' + i)}, 900), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := client.PutArtifact(ctx, c.JobID, c.LeaseID, agentapi.SideHead, f, fmt.Sprintf("t%d.json", i)); err != nil {
			if !strings.Contains(err.Error(), "budget of 2000 bytes") {
				t.Errorf("file %d refused with %v, want the job's budget named", i, err)
			}
			refused++
		}
	}
	arts, _ := st.ListArtifacts(ctx, c.JobID)
	if len(arts) != 2 || refused != 2 {
		t.Errorf("%d artifacts stored, %d refused; want 2 and 2 (900 B each within 2000 B)", len(arts), refused)
	}
}

// BenchmarkLargeResult uploads one result of 1.7 M requests (the issue's
// 47 MiB) for a plan of as many requests, and reports the server's peak
// RSS growth (client and server share the process: the client's body is
// counted too).
func BenchmarkLargeResult(b *testing.B) {
	const n = 1_700_000
	r := result.Result{Completed: n, Duration: 600, OutputThroughput: 1000, Metrics: map[string]float64{"median_ttft_ms": 150}}
	r.TTFTs, r.InputLens, r.OutputLens, r.ITLs, r.Errors = make([]float64, n), make([]int, n), make([]int, n), make([][]float64, n), make([]string, n)
	for i := range n {
		r.TTFTs[i], r.InputLens[i], r.OutputLens[i], r.ITLs[i] = 0.1+float64(i%7)/100, 128, 2, []float64{0.01}
	}
	raw, _ := json.Marshal(r)
	r = result.Result{}
	for range b.N {
		st, ts := newServer(b, agentserver.Options{Lease: time.Minute})
		c, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, RegistrationToken: regToken, Name: "a", Labels: []string{"gpu"}})
		reg, _ := c.Register(context.Background())
		plan, err := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "abc123"})
		if err != nil {
			b.Fatal(err)
		}
		plan.Workload.NumPrompts, plan.Workload.OutputLen = n, 2
		pb, _ := json.Marshal(plan)
		if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Repo: "o/r", Labels: []string{"gpu"}, Config: pb}); err != nil {
			b.Fatal(err)
		}
		ac, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: reg.Token})
		j, err := ac.Claim(context.Background(), time.Second)
		if err != nil || j == nil {
			b.Fatalf("claim: %v", err)
		}
		req := agentapi.ResultRequest{LeaseID: j.LeaseID, IdempotencyKey: "k", Kind: "measured", Result: raw}
		body, _ := json.Marshal(req)
		runtime.GC()
		rss0 := procKiB("VmRSS")
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM to the current RSS
		hreq, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/jobs/%d/results", ts.URL, j.JobID), bytes.NewReader(body))
		hreq.Header.Set("Authorization", "Bearer "+reg.Token)
		resp, err := ts.Client().Do(hreq)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			b.Fatalf("upload: %d", resp.StatusCode)
		}
		b.ReportMetric(float64(len(raw))/(1<<20), "result-MiB")
		b.ReportMetric(float64(procKiB("VmHWM")-rss0)/1024, "peak-rss-growth-MiB")
		ts.Close()
	}
}

// procKiB reads a kB field of /proc/self/status (0 off Linux).
func procKiB(field string) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}

// TestRunnerNames: a second registration under a name in use is refused
// unless it presents the name's token; revoking or expiring a registration
// cuts its token off and frees the name.
func TestRunnerNames(t *testing.T) {
	ctx := context.Background()
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	first := register(t, ts, "gpu-01")
	reg := func(prev string) (int, agentapi.RegisterResponse, agentapi.ErrorBody) {
		var ok agentapi.RegisterResponse
		var eb agentapi.ErrorBody
		req := agentapi.RegisterRequest{Name: "gpu-01", Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-evil"}, PreviousToken: prev}
		code := call(t, ts, regToken, "/api/v1/agents/register", req, &ok)
		if code != 200 {
			_ = call(t, ts, regToken, "/api/v1/agents/register", req, &eb)
		}
		return code, ok, eb
	}
	claim := func(tok string) int { return call(t, ts, tok, "/api/v1/jobs/claim?wait=1ms", struct{}{}, nil) }

	if code, _, eb := reg(""); code != 409 || !strings.Contains(eb.Error, "perfgate runners revoke gpu-01") {
		t.Fatalf("taking a live name: %d %q, want 409 naming the way out", code, eb.Error)
	}
	if code := claim(first.Token); code != 204 {
		t.Errorf("the first runner's token after a refused takeover: %d, want it still working (204)", code)
	}
	if code, _, _ := reg("not-the-token"); code != 409 {
		t.Errorf("a wrong previous token: %d, want 409", code)
	}
	code, again, _ := reg(first.Token)
	if code != 200 || again.AgentID != first.AgentID {
		t.Fatalf("re-registration with its token: %d %+v, want 200 under agent %d", code, again, first.AgentID)
	}
	if claim(first.Token) != 401 || claim(again.Token) != 204 {
		t.Errorf("after re-registering, the old token must stop and the new one work")
	}

	if _, err := st.RevokeAgent(ctx, "gpu-01"); err != nil {
		t.Fatal(err)
	}
	if code := claim(again.Token); code != 401 {
		t.Errorf("a revoked token: %d, want 401", code)
	}
	code, third, _ := reg("")
	if code != 200 {
		t.Fatalf("registering a revoked name: %d, want 200", code)
	}
	if _, err := st.RevokeAgent(ctx, "no-such"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoke of an unknown name: %v, want ErrNotFound", err)
	}

	// Expiry: a registration unseen since the cut-off is revoked.
	junk := register(t, ts, "junk")
	names, err := st.ExpireAgents(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || claim(junk.Token) != 401 || claim(third.Token) != 401 {
		t.Errorf("expired %v; want gpu-01 and junk, their tokens refused", names)
	}
}
