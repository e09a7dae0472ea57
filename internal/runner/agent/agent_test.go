package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const regToken = "reg-secret"

// perfgateBin is the perfgate binary the process tests run, built once.
var perfgateBin string

// endToEnd is how many of the end-to-end tests run at once when go test
// is given no -parallel: each is its own server, store, agents and
// engines (ports picked by the kernel), and each spends its time waiting
// on its engines' simulated decode steps and on leases, not on the CPU,
// so the default of GOMAXPROCS (two in CI) would leave the cores idle.
const endToEnd = 6

func TestMain(m *testing.M) {
	flag.Parse() // testing.Short and the flag below need the flags parsed
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(endToEnd)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	dir, err := os.MkdirTemp("", "perfgate-agent-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	perfgateBin = filepath.Join(dir, "perfgate")
	build := exec.Command("go", "build", "-o", perfgateBin, "github.com/perfgate/perfgate/cmd/perfgate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build perfgate:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	agent.StopTestBuilder()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a perfgate server's queue + agent API on a real SQLite store and a
// real loopback listener that can be restarted on the same address.
type env struct {
	t      *testing.T
	st     store.Store
	lease  time.Duration
	addr   string
	source agentserver.SourceFetcher // what the server fetches commits with (nil: none)
	arts   *artifact.Dir             // where uploaded artifacts go
	mu     sync.Mutex
	srv    *http.Server
}

func newEnv(t *testing.T, lease time.Duration) *env {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	arts, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, lease: lease, arts: arts}
	e.start("127.0.0.1:0")
	t.Cleanup(func() {
		e.stop()
		st.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go agentserver.RunReaper(ctx, st, 100*time.Millisecond, nil, zerolog.Nop())
	return e
}

func (e *env) start(addr string) {
	e.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger for a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	h := agentserver.NewServer(e.st, agentserver.Options{RegistrationToken: regToken, Lease: e.lease, LongPoll: 2 * time.Second, Source: e.source,
		ArtifactFiles: e.arts, ArtifactRows: e.st})
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	e.mu.Lock()
	e.addr, e.srv = ln.Addr().String(), srv
	e.mu.Unlock()
}

func (e *env) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
}

func (e *env) url() string { return "http://" + e.addr }

// register gets an agent token through the API, as an operator would.
func (e *env) register(name, gpuUUID string) string {
	e.t.Helper()
	c, err := agentapi.NewClient(agentapi.ClientConfig{Server: e.url(), RegistrationToken: regToken,
		Name: name, Labels: []string{"gpu"}, GPUUUIDs: []string{gpuUUID}})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(poll.Context(e.t))
	defer cancel()
	r, err := c.Register(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Token
}

// plan is a small sim job: prompts at rate req/s, repeats runs.
func plan(sim agentapi.SimEngine, prompts, repeats, warmup int, rate float64) agentapi.Plan {
	return agentapi.Plan{
		Version: agentapi.PlanVersion, Tier: "quick", Repo: "o/r", HeadSHA: "abc123",
		Engine: agentapi.Engine{Sim: &sim, Model: "perfgate-sim", StartTimeout: agentapi.Duration(10 * time.Second)},
		Workload: agentapi.Workload{Endpoint: "/v1/completions", InputLen: 48, OutputLen: 8,
			NumPrompts: prompts, RequestRate: result.Rate(rate), Seed: 1},
		Warmup: warmup, Repeats: repeats,
	}
}

func (e *env) enqueue(p agentapi.Plan, tier string, pr int) store.Job {
	e.t.Helper()
	p.Tier = tier
	b, _ := json.Marshal(p)
	j, err := e.st.Enqueue(context.Background(), store.JobSpec{Tier: tier, Kind: "pull_request", Repo: "o/r",
		PRNumber: pr, HeadSHA: p.HeadSHA, Config: b, Labels: []string{"gpu"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// runAgent runs an in-process agent until the test ends.
func (e *env) runAgent(name, gpuUUID string) {
	e.t.Helper()
	a, err := agent.New(agent.Config{
		Server: e.url(), Token: e.register(name, gpuUUID), Name: name, Labels: []string{"gpu"},
		GPU: gpu.NewFakeProvider(gpu.NewFake(gpuUUID)), Log: zerolog.Nop(), CacheDir: filepath.Join(e.t.TempDir(), "sources"),
		ClaimWait: time.Second, LogFlush: 200 * time.Millisecond, SampleInterval: 50 * time.Millisecond,
		Backoff: agentapi.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			e.t.Errorf("agent %s: %v", name, err)
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// agentProc is a `perfgate agent` process.
type agentProc struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

func (e *env) startAgentProc(name, gpuUUID string, extra ...string) *agentProc {
	e.t.Helper()
	args := append([]string{"agent", "--server", e.url(), "--token", e.register(name, gpuUUID),
		"--labels", "gpu", "--name", name, "--fake-gpu", gpuUUID, "--cache-dir", e.t.TempDir()}, extra...)
	cmd := exec.Command(perfgateBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, out: &out}
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("agent %s output:\n%s", name, out.String())
		}
	})
	return p
}

// waitFor polls cond until it holds. d is what the wait takes on an idle
// machine: a slower one is logged, not failed (the machine is shared); only
// the test's own deadline ends it.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	start := time.Now()
	poll.Until(t, what, cond)
	if took := time.Since(start); took > d {
		t.Logf("waiting for %s took %v (%v on an idle machine)", what, took.Round(time.Millisecond), d)
	}
}

func (e *env) job(id int64) store.Job {
	e.t.Helper()
	j, err := e.st.GetJob(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) results(id int64) []store.Result {
	e.t.Helper()
	rs, err := e.st.ListResults(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func finished(j store.Job) bool {
	return j.Status == jobstate.Succeeded || j.Status == jobstate.Failed || j.Status == jobstate.Cancelled
}

// checkSucceededOnce checks a job succeeded and its final attempt stored
// each measured run exactly once, with environment and telemetry.
func (e *env) checkSucceededOnce(id int64, repeats int) {
	e.t.Helper()
	j := e.job(id)
	if j.Status != jobstate.Succeeded {
		e.t.Fatalf("job %d: %s (%s), want succeeded", id, j.Status, j.FailureReason)
	}
	runs := map[int]int{}
	for _, r := range e.results(id) {
		if r.Attempt != j.Attempts || r.Kind != jobstate.KindMeasured {
			continue
		}
		runs[r.RunIndex]++
		var env result.Environment
		if err := json.Unmarshal(r.Environment, &env); err != nil || env.GPUUUID == "" || env.Driver == "" || env.Commit != "abc123" || !env.Sim {
			e.t.Errorf("job %d run %d environment: %s (%v)", id, r.RunIndex, r.Environment, err)
		}
		res, err := result.Parse(r.Samples)
		if err != nil || res.Perfgate == nil || res.Perfgate.GPU == nil || !res.Perfgate.GPU.Available || res.Perfgate.GPU.Samples == 0 {
			e.t.Errorf("job %d run %d: no GPU telemetry in the stored result (%v)", id, r.RunIndex, err)
		} else if len(res.TTFTs) == 0 || res.Completed == 0 {
			e.t.Errorf("job %d run %d: stored samples have no per-request data", id, r.RunIndex)
		} else if sm := res.Perfgate.ServerMetrics; sm == nil || sm.PrefixCacheHits == nil {
			e.t.Errorf("job %d run %d: no prefix-cache counters scraped from the sim", id, r.RunIndex)
		} else if *sm.PrefixCacheHits != 0 {
			// Every run replays the same prompts: salted per run, none may
			// find an earlier run's in the cache.
			e.t.Errorf("job %d run %d: %v prompt tokens came from the prefix cache", id, r.RunIndex, *sm.PrefixCacheHits)
		}
	}
	for i := range repeats {
		if runs[i] != 1 {
			e.t.Errorf("job %d attempt %d: run %d stored %d times, want once (runs %v)", id, j.Attempts, i, runs[i], runs)
		}
	}
	if len(runs) != repeats {
		e.t.Errorf("job %d: runs %v, want %d", id, runs, repeats)
	}
}

// TestAgentKilledMidRun: SIGKILL an agent process mid-run; its job is
// re-queued when the lease lapses and completed by another agent, and the
// dead agent's late upload is refused.
func TestAgentKilledMidRun(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := newEnv(t, 2*time.Second)
	job := e.enqueue(plan(agentapi.SimEngine{}, 20, 3, 2, 20), "quick", 1)
	token1 := e.register("dead", "GPU-dead")
	p1 := exec.Command(perfgateBin, "agent", "--server", e.url(), "--token", token1, "--name", "dead",
		"--labels", "gpu", "--fake-gpu", "GPU-dead")
	var out bytes.Buffer
	p1.Stdout, p1.Stderr = &out, &out
	if err := p1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p1.Process.Kill(); _ = p1.Wait() })
	waitFor(t, "the first result", 30*time.Second, func() bool { return len(e.results(job.ID)) > 0 })
	lease1 := e.job(job.ID).LeaseID
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()

	waitFor(t, "the job to be re-queued", 15*time.Second, func() bool { return e.job(job.ID).Status == jobstate.Queued })
	e.startAgentProc("alive", "GPU-alive")
	waitFor(t, "the job to finish", 40*time.Second, func() bool { return finished(e.job(job.ID)) })
	e.checkSucceededOnce(job.ID, 3)
	if j := e.job(job.ID); j.Attempts != 2 {
		t.Errorf("attempts: %d, want 2", j.Attempts)
	}

	// The dead agent's late upload, replayed with its lease: refused.
	c, _ := agentapi.NewClient(agentapi.ClientConfig{Server: e.url(), Token: token1})
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	_, err := c.PutResult(ctx, job.ID, agentapi.ResultRequest{LeaseID: lease1, IdempotencyKey: "late", Kind: "measured",
		Result: json.RawMessage(`{"completed":1}`)})
	if !errors.Is(err, agentapi.ErrLeaseLost) {
		t.Errorf("late upload from the killed agent: %v, want 409 lease lost", err)
	}
	if _, err := c.Finish(ctx, job.ID, agentapi.FinishRequest{LeaseID: lease1, Status: "failed"}); !errors.Is(err, agentapi.ErrLeaseLost) {
		t.Errorf("late finish from the killed agent: %v, want 409 lease lost", err)
	}
}

// TestServerRestartMidRun: the server goes away mid-run and comes back on
// the same address and database; the agent retries and every result lands
// once.
func TestServerRestartMidRun(t *testing.T) {
	skipShort(t)
	e := newEnv(t, 10*time.Second)
	job := e.enqueue(plan(agentapi.SimEngine{}, 20, 3, 0, 20), "quick", 1)
	e.runAgent("a", "GPU-a")
	waitFor(t, "the first result", 30*time.Second, func() bool { return len(e.results(job.ID)) > 0 })
	addr := e.addr
	e.stop()
	time.Sleep(1500 * time.Millisecond) // the next run's upload meets a dead server
	e.start(addr)
	waitFor(t, "the job to finish", 40*time.Second, func() bool { return finished(e.job(job.ID)) })
	e.checkSucceededOnce(job.ID, 3)
	if j := e.job(job.ID); j.Attempts != 1 {
		t.Errorf("attempts: %d, want 1: the restart must not cost the lease", j.Attempts)
	}
}

var (
	pidRE  = regexp.MustCompile(`"pid":(\d+)`)
	portRE = regexp.MustCompile(`"port":(\d+)`)
)

// TestEngineFaults: an engine that never becomes ready, crashes mid-run or
// answers 5xx fails the job with that reason in the job and its log, and no
// engine process is left.
func TestEngineFaults(t *testing.T) {
	t.Parallel()
	simCmd := []string{perfgateBin, "sim", "--addr", "127.0.0.1:{{.Port}}", "--model", "perfgate-sim"}
	cmdPlan := func(argv []string, timeout time.Duration, prompts int) agentapi.Plan {
		p := plan(agentapi.SimEngine{}, prompts, 3, 0, 20)
		// No commit: the configured command alone, which a runner runs
		// without allow_uncontained (no pull request's code).
		p.HeadSHA = ""
		p.Engine = agentapi.Engine{Command: argv, Model: "perfgate-sim", StartTimeout: agentapi.Duration(timeout)}
		return p
	}
	neverReadySim := plan(agentapi.SimEngine{StartupDelay: agentapi.Duration(time.Minute)}, 5, 1, 0, 0)
	neverReadySim.Engine.StartTimeout = agentapi.Duration(500 * time.Millisecond)
	for _, tc := range []struct {
		name    string
		plan    agentapi.Plan
		reason  string
		process bool
	}{
		{"sim never ready", neverReadySim, "engine not ready after 500ms", false},
		{"process never ready", cmdPlan(append(simCmd, "--startup-delay", "1m"), time.Second, 5), "engine not ready after", true},
		// The engine dies after its 20th answer, inside run 1 of 200
		// prompts, however long it took to start (not a timer's bet).
		{"process crashes mid-run", cmdPlan(append(simCmd, "--crash-after", "20"), time.Minute, 200), "engine crashed during run 1 of 3", true},
		// bench sends one request alone first: an engine that fails every
		// request stops the run there, with its own message.
		{"engine answers 5xx", plan(agentapi.SimEngine{ErrorRate: 1}, 10, 3, 0, 0), "run 1 of 3: first request failed: HTTP 500: simulated engine error", false},
		{"process answers 5xx", cmdPlan(append(simCmd, "--error-rate", "1"), time.Minute, 10), "first request failed: HTTP 500: simulated engine error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 10*time.Second)
			job := e.enqueue(tc.plan, "quick", 1)
			e.runAgent("a", "GPU-a")
			waitFor(t, "the job to finish", 40*time.Second, func() bool { return finished(e.job(job.ID)) })
			j := e.job(job.ID)
			if j.Status != jobstate.Failed || !strings.Contains(j.FailureReason, tc.reason) {
				t.Fatalf("job: %s %q, want failed with %q", j.Status, j.FailureReason, tc.reason)
			}
			var log []byte
			waitFor(t, "the job log", 5*time.Second, func() bool {
				log, _ = e.st.ReadLog(context.Background(), job.ID, j.Attempts)
				return bytes.Contains(log, []byte("job finished"))
			})
			if !bytes.Contains(log, []byte(tc.reason)) {
				t.Errorf("job log lacks %q:\n%s", tc.reason, log)
			}
			if !bytes.Contains(log, []byte("engine")) {
				t.Errorf("job log says nothing of the engine:\n%s", log)
			}
			if tc.process {
				m := pidRE.FindSubmatch(log)
				if m == nil {
					t.Fatalf("job log names no engine pid:\n%s", log)
				}
				pid, _ := strconv.Atoi(string(m[1]))
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("engine process %d still exists after the job (kill -0: %v): the GPU is not freed", pid, err)
				}
			}
		})
	}
}

// TestSupersededCancelled: a newer push cancels the running job through
// its next heartbeat, long before its runs would end: within seconds even
// under the default two-minute lease (whose quarter was the old heartbeat).
func TestSupersededCancelled(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := newEnv(t, agentapi.DefaultLease)
	job := e.enqueue(plan(agentapi.SimEngine{}, 100, 3, 0, 10), "quick", 7) // 3 runs of ~10 s
	e.runAgent("a", "GPU-a")
	waitFor(t, "the job to run", 20*time.Second, func() bool { return e.job(job.ID).Status == jobstate.Running })
	time.Sleep(300 * time.Millisecond)
	sup, err := e.st.CancelSuperseded(context.Background(), "o/r", 7, "def456")
	if err != nil || len(sup.Signalled) != 1 {
		t.Fatalf("cancel superseded: %+v %v", sup, err)
	}
	start := time.Now()
	waitFor(t, "the job to be cancelled", 8*time.Second, func() bool { return finished(e.job(job.ID)) })
	t.Logf("cancelled %s after the push (cancellation polled every %s)", time.Since(start).Round(10*time.Millisecond), agent.DefaultCancelPoll)
	j := e.job(job.ID)
	if j.Status != jobstate.Cancelled || !strings.Contains(j.FailureReason, "cancelled by the server: a newer push or run replaced it") {
		t.Errorf("job: %s %q, want cancelled by the server for the newer push", j.Status, j.FailureReason)
	}
	if n := len(e.results(job.ID)); n != 0 {
		t.Errorf("%d results stored: the first run should have been cut short", n)
	}
}

// TestDoneWhen: the queue + API, two `perfgate agent` processes with fake
// GPUs and the sim; quick and merge jobs; one agent killed mid-run. Every
// job ends succeeded exactly once, with results, environments and telemetry.
func TestDoneWhen(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := newEnv(t, 2*time.Second)
	var jobs []store.Job
	for i := range 2 {
		jobs = append(jobs, e.enqueue(plan(agentapi.SimEngine{}, 20, 3, 2, 40), "quick", 10+i))
		jobs = append(jobs, e.enqueue(plan(agentapi.SimEngine{}, 30, 3, 5, 40), "merge", 20+i))
	}
	victim := e.startAgentProc("victim", "GPU-victim")
	e.startAgentProc("survivor", "GPU-survivor")

	// Kill the victim once it has uploaded a result of a job it still runs.
	waitFor(t, "the victim mid-run", 30*time.Second, func() bool {
		for _, j := range jobs {
			cur := e.job(j.ID)
			if cur.Status == jobstate.Running && len(e.results(j.ID)) > 0 && agentName(t, e, cur.AgentID) == "victim" {
				return true
			}
		}
		return false
	})
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()

	waitFor(t, "every job to finish", 50*time.Second, func() bool {
		for _, j := range jobs {
			if !finished(e.job(j.ID)) {
				return false
			}
		}
		return true
	})
	retried := 0
	for _, j := range jobs {
		e.checkSucceededOnce(j.ID, 3)
		if e.job(j.ID).Attempts > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no job needed a second attempt: the victim was not killed mid-run")
	}
}

func agentName(t *testing.T, e *env, id int64) string {
	as, err := e.st.ListAgents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.ID == id {
			return a.Name
		}
	}
	return ""
}

// skipShort skips an end-to-end test (a server, an agent and engines
// started for real, seconds each) under go test -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end to end with real engines: skipped with -short")
	}
}
