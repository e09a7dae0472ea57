package agentserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/tarball"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// TestResultValidation: what the results API refuses, and why (issue:
// null, {}, negative counts, runs outside the plan, a second result for a
// run, huge idempotency keys, interleaved runs out of their place).
func TestResultValidation(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	a := register(t, ts, "a")
	plan, err := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Repo: "o/r", HeadSHA: "abc123", Labels: []string{"gpu"}, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	jp := fmt.Sprintf("/api/v1/jobs/%d/results", c.JobID)
	up := func(key string, run int, res json.RawMessage) agentapi.ResultRequest {
		return agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: key, RunIndex: run, Kind: "measured", Result: res}
	}
	neg := func(field string, v any) json.RawMessage {
		var m map[string]any
		_ = json.Unmarshal(sampleResult(), &m)
		m[field] = v
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		name string
		req  agentapi.ResultRequest
		want string
	}{
		{"null result", up("k1", 0, json.RawMessage(`null`)), "not a benchmark result"},
		{"empty object", up("k2", 0, json.RawMessage(`{}`)), "not a benchmark result"},
		{"no result", agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "k3", Kind: "measured"}, "not a benchmark result"},
		{"negative completed", up("k4", 0, neg("completed", -3)), "completed is -3: a count cannot be negative"},
		{"negative ttft", up("k5", 0, neg("ttfts", []float64{0.1, -0.2})), "ttfts[1] is -0.2"},
		{"negative metric", up("k6", 0, neg("median_ttft_ms", -1)), "median_ttft_ms is -1"},
		{"run past the plan", up("k7", 3, sampleResult()), "run_index 3 is outside the plan's 3 runs"},
		{"negative run", up("k8", -1, sampleResult()), "run_index -1 is outside"},
		{"key over 200 bytes", up(strings.Repeat("k", 201), 0, sampleResult()), "idempotency_key is 201 bytes: at most 200"},
		{"side on a one-commit plan", agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "k9", Kind: "measured", Side: "base", Result: sampleResult()}, "the plan measures one commit"},
	} {
		var eb agentapi.ErrorBody
		if code := call(t, ts, a.Token, jp, tc.req, &eb); code != 400 || !strings.Contains(eb.Error, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.name, code, eb.Error, tc.want)
		}
	}
	if rs, _ := st.ListResults(context.Background(), c.JobID); len(rs) != 0 {
		t.Fatalf("refused uploads stored %d results", len(rs))
	}

	// A run is uploaded once: a retry with its key answers the stored one,
	// another key for the same run is 409 run_stored, which the client
	// tells apart from a lost lease.
	var rr agentapi.ResultResponse
	if code := call(t, ts, a.Token, jp, up("run-0", 0, sampleResult()), &rr); code != 201 {
		t.Fatalf("first upload: %d", code)
	}
	first := rr.ResultID
	if code := call(t, ts, a.Token, jp, up("run-0", 0, sampleResult()), &rr); code != 200 || rr.ResultID != first {
		t.Errorf("retry: %d %+v, want 200 with result %d", code, rr, first)
	}
	var eb agentapi.ErrorBody
	if code := call(t, ts, a.Token, jp, up("run-0-again", 0, sampleResult()), &eb); code != 409 || eb.Code != agentapi.CodeRunStored {
		t.Errorf("second result for run 0: %d %+v, want 409 %s", code, eb, agentapi.CodeRunStored)
	}
	client, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: a.Token})
	if _, err := client.PutResult(context.Background(), c.JobID, up("run-0-third", 0, sampleResult())); !errors.Is(err, agentapi.ErrRunStored) || errors.Is(err, agentapi.ErrLeaseLost) {
		t.Errorf("client on run_stored: %v, want ErrRunStored, not ErrLeaseLost", err)
	}

	// The log has a per-job cap, an offset near MaxInt64 included (the
	// sum with the chunk's length would wrap below it).
	for _, off := range []int64{agentapi.MaxJobLog - 2, math.MaxInt64 - 2} {
		var lr agentapi.ErrorBody
		logs := fmt.Sprintf("/api/v1/jobs/%d/logs?lease_id=%s&offset=%d", c.JobID, c.LeaseID, off)
		if code := call(t, ts, a.Token, logs, []byte("12345"), &lr); code != 413 || lr.Code != agentapi.CodeLogFull {
			t.Errorf("log at offset %d: %d %+v, want 413 %s", off, code, lr, agentapi.CodeLogFull)
		}
	}
}

// TestInterleavedUploads: an interleaved job's runs must come with the
// side and pair the plan's ABBA order gives them.
func TestInterleavedUploads(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	a := register(t, ts, "a")
	plan, err := agentapi.PlanAt(mustDefault(), "merge", agentapi.Commits{Repo: "o/r", Head: "aaaa1111", Base: "bbbb2222", Interleave: &agentapi.Interleave{Pairs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range plan.Schedule() {
		order = append(order, fmt.Sprintf("%s%d", s.Side[:1], s.Pair))
	}
	if got := strings.Join(order, " "); got != "b0 h0 h1 b1" {
		t.Fatalf("schedule %s, want b0 h0 h1 b1", got)
	}
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "merge", Repo: "o/r", HeadSHA: "aaaa1111", BaseSHA: "bbbb2222", Labels: []string{"gpu"}, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	jp := fmt.Sprintf("/api/v1/jobs/%d/results", c.JobID)
	req := func(run int, side string, pair int) agentapi.ResultRequest {
		return agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: fmt.Sprintf("r%d-%s-%d", run, side, pair), RunIndex: run, Kind: "measured", Side: side, Pair: pair, Result: sampleResult()}
	}
	var eb agentapi.ErrorBody
	if code := call(t, ts, a.Token, jp, req(1, "base", 0), &eb); code != 400 || !strings.Contains(eb.Error, "run 1 is the head run of pair 0") {
		t.Errorf("wrong side: %d %q", code, eb.Error)
	}
	if code := call(t, ts, a.Token, jp, req(2, "head", 0), &eb); code != 400 || !strings.Contains(eb.Error, "run 2 is the head run of pair 1") {
		t.Errorf("wrong pair: %d %q", code, eb.Error)
	}
	for i, s := range plan.Schedule() {
		if code := call(t, ts, a.Token, jp, req(i, s.Side, s.Pair), nil); code != 201 {
			t.Errorf("run %d (%s %d): %d, want 201", i, s.Side, s.Pair, code)
		}
	}
	rs, err := st.ListResults(context.Background(), c.JobID)
	if err != nil || len(rs) != 4 || rs[0].Side != "base" || rs[1].Side != "head" || rs[2].Pair != 1 || rs[3].Side != "base" {
		t.Errorf("stored %d results (%v): %+v", len(rs), err, rs)
	}
}

// fakeSource serves fixed bytes per commit.
type fakeSource struct {
	data  map[string][]byte
	calls int
}

func (f *fakeSource) Tarball(_ context.Context, inst int64, repo, sha string) (io.ReadCloser, error) {
	f.calls++
	b, ok := f.data[sha]
	if !ok {
		return nil, fmt.Errorf("tarball %s@%s: %w", repo, sha, tarball.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// TestSourceRoute: the source route streams only the job's own commits,
// only under its current lease, and says plainly when it cannot.
func TestSourceRoute(t *testing.T) {
	src := &fakeSource{data: map[string][]byte{"aaaa1111": []byte("tarball of aaaa1111")}}
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second, Source: src})
	a := register(t, ts, "a")
	b := register(t, ts, "b")
	plan, err := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "aaaa1111"})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Repo: "o/r", HeadSHA: "aaaa1111", Labels: []string{"gpu"}, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	get := func(token, sha, lease string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/source?sha=%s&lease_id=%s", ts.URL, c.JobID, sha, lease), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(a.Token, "aaaa1111", c.LeaseID); code != 200 || body != "tarball of aaaa1111" {
		t.Errorf("own commit: %d %q", code, body)
	}
	for _, tc := range []struct {
		name, token, sha, lease string
		want                    int
		msg                     string
	}{
		{"another commit", a.Token, "cccc3333", c.LeaseID, 403, "an agent may fetch only its job's commits"},
		{"not a sha", a.Token, "../etc", c.LeaseID, 400, "not a commit id"},
		{"stale lease", a.Token, "aaaa1111", "old", 409, "abandon the job"},
		{"another agent", b.Token, "aaaa1111", c.LeaseID, 403, "belongs to another agent"},
		{"no token", "", "aaaa1111", c.LeaseID, 401, "Bearer"},
	} {
		if code, body := get(tc.token, tc.sha, tc.lease); code != tc.want || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, code, body, tc.want, tc.msg)
		}
	}
	if src.calls != 1 {
		t.Errorf("GitHub was asked %d times, want once (refusals come first)", src.calls)
	}

	// The client streams it, and a commit GitHub lacks is a 404 it does
	// not retry.
	client, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: a.Token})
	rc, err := client.Source(context.Background(), c.JobID, c.LeaseID, "aaaa1111")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "tarball of aaaa1111" {
		t.Errorf("client source: %q", got)
	}
	delete(src.data, "aaaa1111")
	var se *agentapi.StatusError
	if _, err := client.Source(context.Background(), c.JobID, c.LeaseID, "aaaa1111"); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("missing commit: %v, want a 404", err)
	}

	// A server without GitHub access says so.
	st2, ts2 := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	a2 := register(t, ts2, "a")
	if _, err := st2.Enqueue(context.Background(), store.JobSpec{Tier: "quick", Repo: "o/r", HeadSHA: "aaaa1111", Labels: []string{"gpu"}, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c2 agentapi.ClaimResponse
	if code := call(t, ts2, a2.Token, "/api/v1/jobs/claim", struct{}{}, &c2); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	c2client, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts2.URL, Token: a2.Token})
	if _, err := c2client.Source(context.Background(), c2.JobID, c2.LeaseID, "aaaa1111"); !errors.As(err, &se) || se.Status != 501 || !strings.Contains(se.Msg, "no GitHub App") {
		t.Errorf("server without GitHub: %v, want 501 saying why", err)
	}
}

// TestOneAgentRow: registering again under the same name, with the name's
// token, keeps the agent's row (and id) and retires its old token.
func TestOneAgentRow(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{})
	first := register(t, ts, "gpu-host")
	var second agentapi.RegisterResponse
	if code := call(t, ts, regToken, "/api/v1/agents/register", agentapi.RegisterRequest{
		Name: "gpu-host", Labels: []string{"gpu"}, PreviousToken: first.Token}, &second); code != 200 {
		t.Fatalf("re-register with the name's token: %d", code)
	}
	agents, err := st.ListAgents(context.Background())
	if err != nil || len(agents) != 1 || first.AgentID != second.AgentID {
		t.Fatalf("agents %+v (%v); ids %d and %d, want one row", agents, err, first.AgentID, second.AgentID)
	}
	if code := call(t, ts, first.Token, "/api/v1/jobs/claim?wait=0s", struct{}{}, nil); code != 401 {
		t.Errorf("old token after re-registering: %d, want 401", code)
	}
}

// TestClientDeadlines: a server that accepts a call and never answers
// costs one attempt's deadline, not the agent: the call is retried, and
// retries show at warn level after a few attempts.
func TestClientDeadlines(t *testing.T) {
	var calls atomic.Int32
	hang := make(chan struct{})
	defer close(hang)
	ts := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 4 {
			select { // a wedged server: the answer never comes
			case <-r.Context().Done():
			case <-hang:
			}
			return
		}
		_ = json.NewEncoder(w).Encode(agentapi.HeartbeatResponse{Cancel: true})
	}))
	var logs bytes.Buffer
	c, err := agentapi.NewClient(agentapi.ClientConfig{Server: ts, Token: "t", Timeout: 100 * time.Millisecond,
		Backoff: agentapi.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	// The wedged server never answers its first four calls: only a
	// per-attempt deadline gets the heartbeat past them, however slow the
	// machine (a missing one fails at the test's deadline, not a guess).
	hb, err := c.Heartbeat(ctx, 1, "l")
	if err != nil || !hb.Cancel || calls.Load() != 5 {
		t.Fatalf("heartbeat: %+v %v after %d calls", hb, err, calls.Load())
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, "no answer within 100ms") || !strings.Contains(out, "server reachable again") {
		t.Errorf("retries not visible at warn:\n%s", out)
	}
	// On a loaded machine an attempt may also miss its deadline before
	// reaching the server: count the failures the client saw.
	failures := strings.Count(out, `"message":"server unreachable: retrying"`)
	if failures < 4 || strings.Count(out, `"level":"warn"`) != failures-2 {
		t.Errorf("want warn from the third attempt on (%d failures, at least the server's 4):\n%s", failures, out)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestPlanAt: a plan names the commits it measures; the repository's port
// is the container's, never a fixed host port; the build step and the
// interleave order come through; bad commits and orders are refused.
func TestPlanAt(t *testing.T) {
	cfg := mustDefault()
	cfg.Server.Image, cfg.Server.Command = "vllm/vllm-openai@sha256:"+strings.Repeat("ab", 32), nil
	cfg.Server.Build.Command = []string{"docker", "build", "-t", "e:{{.SHA}}", "."}
	cfg.Server.Build.Image = "e:{{.SHA}}"
	p, err := agentapi.PlanAt(cfg, "merge", agentapi.Commits{Repo: "o/r", Head: "aaaa1111", Base: "bbbb2222", Interleave: &agentapi.Interleave{}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != agentapi.PlanVersion || p.Repo != "o/r" || p.HeadSHA != "aaaa1111" || p.BaseSHA != "bbbb2222" {
		t.Errorf("plan commits: %+v", p)
	}
	if p.Engine.Port != 0 || p.Engine.ContainerPort != 8000 || p.Engine.Build == nil || p.Engine.Build.Image != "e:{{.SHA}}" {
		t.Errorf("plan engine: %+v", p.Engine)
	}
	if p.Runs() != 2*agentapi.DefaultPairs || strings.Join(p.Commits(), " ") != "aaaa1111 bbbb2222" {
		t.Errorf("runs %d commits %v, want %d runs of both commits", p.Runs(), p.Commits(), 2*agentapi.DefaultPairs)
	}
	one, err := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "aaaa1111", Base: "bbbb2222"})
	if err != nil || one.BaseSHA != "" || len(one.Commits()) != 1 || one.Engine.ContainerPort != 0 {
		t.Errorf("one-commit plan (quick does not interleave): %+v %v", one, err)
	}
	// The merge tier interleaves by default: given the base, the plan
	// measures both commits in the tier's pairs.
	merge, err := agentapi.PlanAt(mustDefault(), "merge", agentapi.Commits{Repo: "o/r", Head: "aaaa1111", Base: "bbbb2222"})
	if err != nil || merge.Interleave == nil || merge.Runs() != 16 || merge.BaseSHA != "bbbb2222" {
		t.Errorf("merge plan: %+v %v, want 8 interleaved pairs", merge, err)
	}
	if head, err := agentapi.PlanAt(mustDefault(), "merge", agentapi.Commits{Repo: "o/r", Head: "aaaa1111"}); err != nil || head.Interleave != nil {
		t.Errorf("merge plan without a base: %+v %v, want the head alone", head, err)
	}
	for _, tc := range []struct {
		c    agentapi.Commits
		want string
	}{
		{agentapi.Commits{Head: "ZZZ not hex"}, "is not a commit id"},
		{agentapi.Commits{Head: "aaaa1111", Interleave: &agentapi.Interleave{}}, "needs both head_sha and base_sha"},
		{agentapi.Commits{Head: "aaaa1111", Base: "bbbb2222", Interleave: &agentapi.Interleave{Pairs: 100}}, "pairs is 100"},
		{agentapi.Commits{Head: "aaaa1111", Base: "bbbb2222", Interleave: &agentapi.Interleave{Order: "abab"}}, `the only order is "abba"`},
	} {
		if _, err := agentapi.PlanAt(mustDefault(), "quick", tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlanAt(%+v): %v, want %q", tc.c, err, tc.want)
		}
	}
	// An agent refuses a plan newer than it knows.
	if _, err := agentapi.ParsePlan([]byte(`{"version": 99, "tier": "quick", "engine": {"sim": {}}, "workload": {"num_prompts": 1}, "repeats": 1}`)); err == nil || !strings.Contains(err.Error(), "upgrade perfgate on the runner") {
		t.Errorf("newer plan: %v", err)
	}
}

// slowSource streams n chunks, one every gap.
type slowSource struct {
	n   int
	gap time.Duration
}

func (s slowSource) Tarball(ctx context.Context, _ int64, _, _ string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < s.n; i++ {
			select {
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			case <-time.After(s.gap):
			}
			if _, err := pw.Write(bytes.Repeat([]byte{'x'}, 1000)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return pr, nil
}

// TestSourceOutlivesWriteTimeout: a tree takes longer to stream than the
// server's write timeout for small answers allows; the source route
// extends its own deadline, so the agent gets all of it.
func TestSourceOutlivesWriteTimeout(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := httptest.NewUnstartedServer(agentserver.NewServer(st, agentserver.Options{RegistrationToken: regToken, Lease: time.Minute,
		LongPoll: time.Second, Source: slowSource{n: 8, gap: 100 * time.Millisecond}}))
	ts.Config.WriteTimeout = 300 * time.Millisecond
	ts.Start()
	defer ts.Close()
	a := register(t, ts, "a")
	plan, _ := agentapi.PlanAt(mustDefault(), "quick", agentapi.Commits{Repo: "o/r", Head: "aaaa1111"})
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Repo: "o/r", HeadSHA: "aaaa1111", Labels: []string{"gpu"}, Config: pb}); err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	client, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: a.Token})
	rc, err := client.Source(ctx, c.JobID, c.LeaseID, "aaaa1111")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n != 8000 {
		t.Fatalf("streamed %d bytes (%v), want all 8000 past the 300ms write timeout", n, err)
	}
}
