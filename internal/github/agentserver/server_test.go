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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const regToken = "reg-secret"

func newServer(t testing.TB, opts agentserver.Options) (store.Store, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.RegistrationToken = regToken
	ts := httptest.NewServer(agentserver.NewServer(st, opts))
	t.Cleanup(ts.Close)
	return st, ts
}

// call posts body (JSON-encoded unless []byte) with a bearer token and
// decodes the answer into out when non-nil.
func call(t *testing.T, ts *httptest.Server, token, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var eb agentapi.ErrorBody
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == "" {
			t.Errorf("%s: error answer %d is not {\"error\": …}: %s", path, resp.StatusCode, data)
		}
	}
	if out != nil && len(data) > 0 {
		_ = json.Unmarshal(data, out)
	}
	return resp.StatusCode
}

func register(t *testing.T, ts *httptest.Server, name string) agentapi.RegisterResponse {
	t.Helper()
	var reg agentapi.RegisterResponse
	if code := call(t, ts, regToken, "/api/v1/agents/register", agentapi.RegisterRequest{
		Name: name, Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-" + name},
	}, &reg); code != 200 || reg.Token == "" {
		t.Fatalf("register %s: %d %+v", name, code, reg)
	}
	return reg
}

func testPlan(t *testing.T) []byte {
	t.Helper()
	p, err := agentapi.PlanFromConfig(config.Default(), "quick")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	return b
}

func sampleResult() json.RawMessage {
	r := result.Result{Completed: 2, TTFTs: []float64{0.1, 0.2}, InputLens: []int{3, 4}, OutputLens: []int{5, 6},
		ITLs: [][]float64{{0.01}, {0.02}}, Errors: []string{"", ""}, OutputThroughput: 42,
		Metrics: map[string]float64{"median_ttft_ms": 150},
		Perfgate: &result.Section{SchemaVersion: 1, E2ELs: []float64{1, 2},
			Environment: result.Environment{GPUUUID: "GPU-a", Hostname: "h"}}}
	b, _ := json.Marshal(r)
	return b
}

// TestProtocol walks one job through every call and checks each refusal
// the protocol promises.
func TestProtocol(t *testing.T) {
	ctx := context.Background()
	var done []store.Job
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: 2 * time.Second,
		OnJobDone: func(_ context.Context, j store.Job) { done = append(done, j) }})
	a := register(t, ts, "a")
	b := register(t, ts, "b")

	// Refusals before any job.
	if code := call(t, ts, "", "/api/v1/jobs/claim", struct{}{}, nil); code != 401 {
		t.Errorf("claim without token: %d, want 401", code)
	}
	if code := call(t, ts, "bogus", "/api/v1/jobs/claim", struct{}{}, nil); code != 401 {
		t.Errorf("claim with unknown token: %d, want 401", code)
	}
	if code := call(t, ts, "wrong", "/api/v1/agents/register", agentapi.RegisterRequest{Name: "x"}, nil); code != 401 {
		t.Errorf("register with wrong registration token: %d, want 401", code)
	}
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, nil); code != 204 {
		t.Errorf("claim on empty queue: %d, want 204", code)
	}

	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Repo: "o/r", PRNumber: 1, HeadSHA: "abc",
		Labels: []string{"gpu"}, GPUUUID: "GPU-a", Config: testPlan(t)})
	if err != nil {
		t.Fatal(err)
	}
	// b lacks the pinned GPU: the job waits for a.
	if code := call(t, ts, b.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, nil); code != 204 {
		t.Errorf("claim of a job pinned to another GPU: %d, want 204", code)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 || c.JobID != job.ID || c.LeaseID == "" {
		t.Fatalf("claim: %d %+v", code, c)
	}
	if _, err := agentapi.ParsePlan(c.Plan); err != nil {
		t.Errorf("claimed plan: %v", err)
	}
	jp := fmt.Sprintf("/api/v1/jobs/%d/", c.JobID)

	var hb agentapi.HeartbeatResponse
	if code := call(t, ts, a.Token, jp+"heartbeat", agentapi.HeartbeatRequest{LeaseID: c.LeaseID}, &hb); code != 200 || hb.Cancel {
		t.Errorf("heartbeat: %d %+v", code, hb)
	}
	for _, tc := range []struct {
		name, token, lease string
		want               int
	}{
		{"stale lease", a.Token, "stale", 409},
		{"foreign job", b.Token, c.LeaseID, 403},
		{"no token", "", c.LeaseID, 401},
	} {
		if code := call(t, ts, tc.token, jp+"heartbeat", agentapi.HeartbeatRequest{LeaseID: tc.lease}, nil); code != tc.want {
			t.Errorf("heartbeat, %s: %d, want %d", tc.name, code, tc.want)
		}
		if code := call(t, ts, tc.token, jp+"results", agentapi.ResultRequest{LeaseID: tc.lease, IdempotencyKey: "k", Result: sampleResult()}, nil); code != tc.want {
			t.Errorf("results, %s: %d, want %d", tc.name, code, tc.want)
		}
	}

	// Logs: an offset that is not the stored length is answered 416 with it.
	logs := jp + "logs?lease_id=" + c.LeaseID + "&offset="
	var lr agentapi.LogResponse
	if code := call(t, ts, a.Token, logs+"0", []byte("hello "), &lr); code != 200 || lr.Length != 6 {
		t.Errorf("log at 0: %d %+v", code, lr)
	}
	var eb agentapi.ErrorBody
	if code := call(t, ts, a.Token, logs+"0", []byte("hello "), &eb); code != 416 || eb.Length == nil || *eb.Length != 6 {
		t.Errorf("log replayed at 0: %d %+v, want 416 with length 6", code, eb)
	}
	if code := call(t, ts, a.Token, logs+"6", []byte("world"), &lr); code != 200 || lr.Length != 11 {
		t.Errorf("log at 6: %d %+v", code, lr)
	}

	// Results: a retry with the same key stores once.
	up := agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "run-0", RunIndex: 0, Kind: "measured", Result: sampleResult()}
	var rr agentapi.ResultResponse
	if code := call(t, ts, a.Token, jp+"results", up, &rr); code != 201 || !rr.Created {
		t.Errorf("first upload: %d %+v, want 201", code, rr)
	}
	if code := call(t, ts, a.Token, jp+"results", up, &rr); code != 200 || rr.Created {
		t.Errorf("retried upload: %d %+v, want 200 not created", code, rr)
	}
	res, err := st.ListResults(ctx, job.ID)
	if err != nil || len(res) != 1 {
		t.Fatalf("stored results: %d, %v; want 1", len(res), err)
	}
	var sum map[string]any
	_ = json.Unmarshal(res[0].Summary, &sum)
	if sum["ttfts"] != nil || sum["median_ttft_ms"] != 150.0 {
		t.Errorf("summary keeps per-request arrays or lost metrics: %s", res[0].Summary)
	}
	if res[0].GPUUUID != "GPU-a" || !strings.Contains(string(res[0].Environment), `"hostname":"h"`) || !bytes.Contains(res[0].Samples, []byte(`"ttfts"`)) {
		t.Errorf("stored result: gpu %q env %s samples %d bytes", res[0].GPUUUID, res[0].Environment, len(res[0].Samples))
	}

	// A job succeeds only with every planned run: 1 of 3 is refused.
	fin := agentapi.FinishRequest{LeaseID: c.LeaseID, Status: "succeeded"}
	plan, _ := agentapi.ParsePlan(c.Plan)
	var short agentapi.ErrorBody
	if code := call(t, ts, a.Token, jp+"finish", fin, &short); code != 409 || !strings.Contains(short.Error, fmt.Sprintf("1 of the plan's %d measured runs", plan.Repeats)) {
		t.Errorf("finish succeeded with 1 of %d runs: %d %q, want 409", plan.Repeats, code, short.Error)
	}
	for i := 1; i < plan.Repeats; i++ {
		more := agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: fmt.Sprintf("run-%d", i), RunIndex: i, Kind: "measured", Result: sampleResult()}
		if code := call(t, ts, a.Token, jp+"results", more, &rr); code != 201 {
			t.Fatalf("upload run %d: %d", i, code)
		}
	}
	var fr agentapi.FinishResponse
	if code := call(t, ts, a.Token, jp+"finish", fin, &fr); code != 200 || fr.Status != "succeeded" || fr.Repeated {
		t.Errorf("finish: %d %+v", code, fr)
	}
	if code := call(t, ts, a.Token, jp+"finish", fin, &fr); code != 200 || !fr.Repeated {
		t.Errorf("retried finish: %d %+v, want 200 repeated", code, fr)
	}
	if len(done) != 1 || done[0].ID != job.ID {
		t.Errorf("OnJobDone calls: %+v, want one for job %d", done, job.ID)
	}
	// A finished job's lease renews nothing.
	if code := call(t, ts, a.Token, jp+"heartbeat", agentapi.HeartbeatRequest{LeaseID: c.LeaseID}, nil); code != 409 {
		t.Errorf("heartbeat after finish: %d, want 409", code)
	}
	if code := call(t, ts, a.Token, jp+"results", agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "late", Result: sampleResult()}, nil); code != 409 {
		t.Errorf("upload after finish: %d, want 409", code)
	}
}

// TestClaimWakesOnEnqueue: a waiting claim returns the job enqueued while
// it waits, well before its long-poll ends.
func TestClaimWakesOnEnqueue(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{LongPoll: 20 * time.Second})
	a := register(t, ts, "a")
	got := make(chan int, 1)
	go func() {
		var c agentapi.ClaimResponse
		got <- call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Repo: "o/r", Labels: []string{"gpu"}, Config: testPlan(t)}); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-got:
		if code != 200 {
			t.Errorf("claim: %d, want 200", code)
		}
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("claim did not wake on enqueue")
	}
}

// TestClientRetries: the client rides out 503s, honours Retry-After and maps
// 409 to ErrLeaseLost and 416 to the server's length.
func TestClientRetries(t *testing.T) {
	fails := 2
	var calls int
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		switch {
		case strings.HasSuffix(r.URL.Path, "/heartbeat") && fails > 0:
			fails--
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
		case strings.HasSuffix(r.URL.Path, "/heartbeat"):
			_ = json.NewEncoder(w).Encode(agentapi.HeartbeatResponse{Cancel: true})
		case strings.HasSuffix(r.URL.Path, "/finish"):
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"error":"lease gone"}`))
		case strings.HasSuffix(r.URL.Path, "/logs"):
			w.WriteHeader(416)
			_, _ = w.Write([]byte(`{"error":"resend","length":7}`))
		}
	}))
	defer ts.Close()
	c, err := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: "t", Backoff: agentapi.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	hb, err := c.Heartbeat(ctx, 1, "l")
	if err != nil || !hb.Cancel || calls != 3 {
		t.Errorf("heartbeat after two 503s: %+v %v after %d calls, want cancel after 3", hb, err, calls)
	}
	if _, err := c.Finish(ctx, 1, agentapi.FinishRequest{LeaseID: "l", Status: "succeeded"}); !errors.Is(err, agentapi.ErrLeaseLost) {
		t.Errorf("finish on 409: %v, want ErrLeaseLost", err)
	}
	var om *agentapi.OffsetMismatchError
	if _, err := c.AppendLog(ctx, 1, "l", 0, []byte("x")); !errors.As(err, &om) || om.Length != 7 {
		t.Errorf("log on 416: %v, want offset mismatch with length 7", err)
	}
}

func mustDefault() *config.Config { return config.Default() }
