package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/tarball"
	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// repo is a real git repository whose commits a test GitHub serves as
// tarballs, as GitHub serves a PR's head and base.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.git("config", "user.email", "dev@example.com")
	r.git("config", "user.name", "dev")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", r.dir}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *repo) write(name, body string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// serveScript is the engine the repository ships: it starts the sim with
// the slowdown its own tree says. The PR's code decides the engine's speed.
const serveScript = `#!/bin/sh
here=$(dirname "$0")
exec "$1" sim --addr "127.0.0.1:$2" --model perfgate-sim --no-noise --decode-step 8ms --slowdown "$(cat "$here/slowdown")"
`

// withGitHub gives the env's agent API a source fetcher over a test GitHub
// serving r, and returns it.
func (e *env) withGitHub(r *repo) *githubtest.Server {
	e.t.Helper()
	gh := ghtest.New(e.t)
	gh.SetGitRepo("o/r", r.dir)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	e.source = tarball.NewGitHub(cc)
	addr := e.addr
	e.stop()
	e.start(addr)
	return gh
}

func (e *env) enqueueAt(p agentapi.Plan, tier string, pr int) store.Job {
	e.t.Helper()
	p.Tier = tier
	b, _ := json.Marshal(p)
	j, err := e.st.Enqueue(context.Background(), store.JobSpec{Tier: tier, Kind: "pull_request", Repo: "o/r", InstallationID: githubtest.InstallationID,
		PRNumber: pr, HeadSHA: p.HeadSHA, BaseSHA: p.BaseSHA, Config: b, Labels: []string{"gpu"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// runAgentWith runs an in-process agent with cfg's extras until the test
// ends or stop is called.
func (e *env) runAgentWith(name, gpuUUID string, edit func(*agent.Config)) (stop func()) {
	e.t.Helper()
	cfg := agent.Config{
		Server: e.url(), Token: e.register(name, gpuUUID), Name: name, Labels: []string{"gpu"},
		GPU: gpu.NewFakeProvider(gpu.NewFake(gpuUUID)), Log: zerolog.Nop(), CacheDir: filepath.Join(e.t.TempDir(), "sources"),
		ClaimWait: time.Second, LogFlush: 200 * time.Millisecond, SampleInterval: 50 * time.Millisecond,
		Backoff: agentapi.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := agent.New(cfg)
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
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

func (e *env) log(id int64) string {
	e.t.Helper()
	b, err := e.st.ReadLog(context.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// TestEnginePerCommit: end to end with a real repository served by the
// test GitHub through the server, an interleaved job starts the engine
// from each commit's own tree: head and base run different code, the slow
// one is the head's (slowdown 2.0 in its tree against 1.0), the runs come in balanced ABBA pairs with their side,
// and each result names the commit and tree it ran. A runner that does not
// allow uncontained engines refuses the same job, and an archive whose
// symlink points out of the tree is refused.
func TestEnginePerCommit(t *testing.T) {
	skipShort(t)
	t.Parallel()
	r := newRepo(t)
	r.write("inference_engine/serve.sh", serveScript)
	r.write("inference_engine/slowdown", "1.0\n")
	base := r.commit("engine")
	r.write("inference_engine/slowdown", "2.0\n")
	// The head also sets a knob the engine acts on: the agent records the
	// line and both sides' effective value.
	r.write("inference_engine/serve.sh", strings.Replace(serveScript, "--slowdown", "--max-num-seqs 32 --slowdown", 1))
	head := r.commit("a slower engine")

	e := newEnv(t, 10*time.Second)
	e.withGitHub(r)
	p := plan(agentapi.SimEngine{}, 40, 0, 5, 0)
	p.HeadSHA, p.BaseSHA = head, base
	p.Interleave = &agentapi.Interleave{Pairs: 2}
	p.Workload.MaxConcurrency = 4
	p.Engine = agentapi.Engine{Command: []string{"sh", "{{.Workdir}}/inference_engine/serve.sh", perfgateBin, "{{.Port}}"},
		Model: "perfgate-sim", StartTimeout: agentapi.Duration(20 * time.Second)}
	job := e.enqueueAt(p, "merge", 1)

	// A runner that keeps pull requests' code in its sandbox refuses a
	// command engine on a commit.
	stopStrict := e.runAgentWith("strict", "GPU-strict", nil)
	waitFor(t, "the strict runner to refuse", 30*time.Second, func() bool { return finished(e.job(job.ID)) })
	stopStrict()
	if j := e.job(job.ID); j.Status != jobstate.Failed || !strings.Contains(j.FailureReason, "only inside its sandbox") {
		t.Fatalf("strict runner: %s %q, want failed refusing an uncontained engine", j.Status, j.FailureReason)
	}

	job = e.enqueueAt(p, "merge", 2)
	e.runAgentWith("trusted", "GPU-trusted", func(c *agent.Config) { c.AllowUncontained = true })
	waitFor(t, "the interleaved job", 90*time.Second, func() bool { return finished(e.job(job.ID)) })
	j := e.job(job.ID)
	if j.Status != jobstate.Succeeded {
		t.Fatalf("job: %s %q\n%s", j.Status, j.FailureReason, e.log(job.ID))
	}
	type run struct {
		side string
		pair int
		env  result.Environment
		tpot float64
		cpu  float64 // the engine's CPU seconds in the run
		// settings is what the engine ran with, as the agent read it.
		settings *result.EngineSettings
	}
	var runs []run
	for _, rs := range e.results(job.ID) {
		var env result.Environment
		if err := json.Unmarshal(rs.Environment, &env); err != nil {
			t.Fatal(err)
		}
		res, err := result.Parse(rs.Samples)
		if err != nil {
			t.Fatal(err)
		}
		tpot, _ := res.Metric("median_tpot_ms")
		var cpu float64
		var settings *result.EngineSettings
		if res.Perfgate != nil {
			cpu, settings = res.Perfgate.EngineCPUSeconds, res.Perfgate.Settings
		}
		runs = append(runs, run{rs.Side, rs.Pair, env, tpot, cpu, settings})
	}
	var order []string
	for _, r := range runs {
		order = append(order, fmt.Sprintf("%s%d", r.side[:1], r.pair))
	}
	if strings.Join(order, " ") != "b0 h0 h1 b1" {
		t.Fatalf("runs %v, want balanced ABBA pairs b0 h0 h1 b1", order)
	}
	trees := map[string]string{}
	median := map[string][]float64{}
	for _, r := range runs {
		want := map[string]string{"base": base, "head": head}[r.side]
		if strings.Contains(r.env.EngineCommand, "{{") || !strings.Contains(r.env.EngineCommand, "/inference_engine/serve.sh") || !strings.Contains(r.env.EngineImage, "{{.Workdir}}") {
			t.Errorf("%s run's engine %q, command %q: want the configured identity and the command as it ran, placeholders filled in", r.side, r.env.EngineImage, r.env.EngineCommand)
		}
		if r.env.Commit != want || r.env.SourceTree == "" || r.env.Sandbox != "uncontained" || r.env.Sim {
			t.Errorf("%s run environment: commit %s tree %q sandbox %q sim %v; want commit %s, a tree, uncontained", r.side, r.env.Commit, r.env.SourceTree, r.env.Sandbox, r.env.Sim, want)
		}
		if t0, ok := trees[r.side]; ok && t0 != r.env.SourceTree {
			t.Errorf("%s runs ran different trees: %s and %s", r.side, t0, r.env.SourceTree)
		}
		trees[r.side] = r.env.SourceTree
		median[r.side] = append(median[r.side], r.tpot)
		if r.env.EngineName != "perfgate-sim" || r.env.EngineVersion == "" {
			t.Errorf("%s run: engine %q %q, want the sim naming itself with a version", r.side, r.env.EngineName, r.env.EngineVersion)
		}
		seqs, ok := r.settings.Get("max_num_seqs")
		want = map[string]string{"base": "256", "head": "32"}[r.side]
		if !ok || seqs.Value != want || seqs.Source != "/metrics vllm:cache_config_info" {
			t.Errorf("%s run: effective max_num_seqs %+v, want %s read from /metrics", r.side, seqs, want)
		}
		var changes []result.KnobChange
		if r.settings != nil {
			changes = r.settings.Changes
		}
		switch {
		case r.side == "base" && len(changes) > 0:
			t.Errorf("base run carries knob lines %+v", changes)
		case r.side == "head" && (len(changes) != 1 || changes[0].Knob != "--max-num-seqs" || changes[0].File != "inference_engine/serve.sh" || changes[0].Line != 3):
			t.Errorf("head run's knob lines %+v, want --max-num-seqs at inference_engine/serve.sh:3", changes)
		}
	}
	if trees["base"] == trees["head"] {
		t.Errorf("head and base ran the same tree %s", trees["base"])
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	// The agent reads the engine's process tree (serve.sh and the sim it
	// runs) around each measured run: a command engine's CPU is measured.
	cpu := 0.0
	for _, r := range runs {
		cpu += r.cpu
	}
	t.Logf("engine CPU over the %d runs: %.2f s", len(runs), cpu)
	if cpu <= 0 {
		t.Errorf("no run carries the engine's CPU time (engine_cpu_seconds)")
	}
	ratio := mean(median["head"]) / mean(median["base"])
	t.Logf("median TPOT: base %.2f ms, head %.2f ms (x%.2f)", mean(median["base"]), mean(median["head"]), ratio)
	if ratio < 1.3 {
		t.Errorf("head/base TPOT x%.2f: the head's slower engine (slowdown 2.0 in its tree) was not the one measured", ratio)
	}
	log := e.log(job.ID)
	if n := strings.Count(log, "starting the engine of base"); n != 2 {
		t.Errorf("base engine started %d times, want 2 (B | H H | B)", n)
	}
	if n := strings.Count(log, "starting the engine of head"); n != 1 {
		t.Errorf("head engine started %d times, want 1 (B | H H | B)", n)
	}

	// The same commit again comes from the cache; an archive with a
	// symlink out of the tree is refused before anything runs.
	if err := os.Symlink("../../../../../etc/passwd", filepath.Join(r.dir, "inference_engine", "leak")); err != nil {
		t.Fatal(err)
	}
	evil := r.commit("a symlink out of the tree")
	bad := p
	bad.Interleave, bad.BaseSHA, bad.HeadSHA, bad.Repeats = nil, "", evil, 1
	bj := e.enqueueAt(bad, "quick", 3)
	waitFor(t, "the unsafe archive job", 30*time.Second, func() bool { return finished(e.job(bj.ID)) })
	if j := e.job(bj.ID); j.Status != jobstate.Failed || !strings.Contains(j.FailureReason, "source archive refused") || !strings.Contains(j.FailureReason, "points outside the tree") {
		t.Errorf("unsafe archive: %s %q, want failed as refused", j.Status, j.FailureReason)
	}
}

// TestTwoAgentsOneHost: two agent processes on one host, one card each,
// run command engines at the same time: each engine gets a free port of
// its agent's choosing, so neither fails "address already in use".
func TestTwoAgentsOneHost(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := newEnv(t, 10*time.Second)
	p, err := agentapi.PlanFromConfig(mustConfig(t), "quick")
	if err != nil {
		t.Fatal(err)
	}
	if p.Engine.Port != 0 {
		t.Fatalf("plan port %d: the repository's config must not fix the engine's host port", p.Engine.Port)
	}
	p.HeadSHA = ""
	p.Engine.Command = []string{perfgateBin, "sim", "--addr", "127.0.0.1:{{.Port}}", "--model", "{{.Model}}", "--startup-delay", "500ms"}
	p.Engine.Model, p.Engine.Args = "perfgate-sim", nil
	p.Workload = agentapi.Workload{Endpoint: "/v1/completions", InputLen: 16, OutputLen: 8, NumPrompts: 60, RequestRate: 30, Seed: 1}
	p.Warmup, p.Repeats = 0, 2
	var jobs []store.Job
	for i := range 2 {
		jobs = append(jobs, e.enqueue(p, "quick", i+1))
	}
	e.startAgentProc("host-gpu0", "GPU-0")
	e.startAgentProc("host-gpu1", "GPU-1")
	waitFor(t, "both jobs", 60*time.Second, func() bool { return finished(e.job(jobs[0].ID)) && finished(e.job(jobs[1].ID)) })
	ports := map[string]bool{}
	agents := map[int64]bool{}
	for _, j := range jobs {
		cur := e.job(j.ID)
		if cur.Status != jobstate.Succeeded {
			t.Errorf("job %d: %s %q", j.ID, cur.Status, cur.FailureReason)
		}
		agents[cur.AgentID] = true
		m := portRE.FindStringSubmatch(e.log(j.ID))
		if m == nil {
			t.Fatalf("job %d log names no engine port", j.ID)
		}
		ports[m[1]] = true
	}
	if len(agents) != 2 || len(ports) != 2 {
		t.Errorf("jobs ran on %d agents with %d distinct ports; want both agents, each on its own port", len(agents), len(ports))
	}
}

func mustConfig(t *testing.T) *config.Config {
	t.Helper()
	return config.Default()
}

// TestEngineEnvironment: an agent process started with its token and the
// registration token in its environment runs a command engine whose
// environment holds neither, nor any PERFGATE_* variable.
func TestEngineEnvironment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 10*time.Second)
	dump := filepath.Join(t.TempDir(), "engine.env")
	p := plan(agentapi.SimEngine{}, 10, 1, 0, 20)
	p.HeadSHA = ""
	p.Engine = agentapi.Engine{Command: []string{"sh", "-c", "env > " + dump + "; exec " + perfgateBin + " sim --addr 127.0.0.1:{{.Port}} --model perfgate-sim"},
		Model: "perfgate-sim", StartTimeout: agentapi.Duration(20 * time.Second)}
	job := e.enqueue(p, "quick", 1)
	token := e.register("envcheck", "GPU-env")
	cmd := exec.Command(perfgateBin, "agent", "--server", e.url(), "--name", "envcheck", "--labels", "gpu", "--fake-gpu", "GPU-env",
		"--cache-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "PERFGATE_AGENT_TOKEN="+token, "PERFGATE_AGENT_REGISTRATION_TOKEN="+regToken, "PERFGATE_EXTRA=x")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "the job", 30*time.Second, func() bool { return finished(e.job(job.ID)) })
	if j := e.job(job.ID); j.Status != jobstate.Succeeded {
		t.Fatalf("job: %s %q\n%s", j.Status, j.FailureReason, out)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, never := range []string{token, regToken, "PERFGATE_"} {
		if strings.Contains(string(b), never) {
			t.Errorf("the engine's environment holds %q:\n%s", never, b)
		}
	}
	if !strings.Contains(string(b), "PATH=") {
		t.Errorf("the engine's environment lacks PATH:\n%s", b)
	}
}

// TestStateDir: an agent registers once with the registration token from
// a file, saves its identity 0600 in its state directory, and a restart
// without any token reuses it: one agent row, the same id.
func TestStateDir(t *testing.T) {
	skipShort(t)
	t.Parallel()
	e := newEnv(t, 10*time.Second)
	state := filepath.Join(t.TempDir(), "state")
	regFile := filepath.Join(t.TempDir(), "registration-token")
	if err := os.WriteFile(regFile, []byte(regToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(args ...string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(perfgateBin, append([]string{"agent", "--server", e.url(), "--labels", "gpu", "--fake-gpu", "GPU-st", "--state-dir", state}, args...)...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	first, out1 := start("--registration-token-file", regFile, "--name", "gpu-box")
	waitFor(t, "the state file", 20*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(state, "agent.json"))
		return err == nil
	})
	_ = first.Process.Signal(os.Interrupt)
	_ = first.Wait()
	fi, err := os.Stat(filepath.Join(state, "agent.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v (%v), want 0600\n%s", fi.Mode().Perm(), err, out1)
	}
	var saved struct {
		AgentID int64  `json:"agent_id"`
		Token   string `json:"token"`
		Name    string `json:"name"`
	}
	b, _ := os.ReadFile(filepath.Join(state, "agent.json"))
	if err := json.Unmarshal(b, &saved); err != nil || saved.Token == "" || saved.Name != "gpu-box" {
		t.Fatalf("state %s (%v)", b, err)
	}

	// Restarted with no token at all: it works as the same agent.
	job := e.enqueue(plan(agentapi.SimEngine{}, 10, 1, 0, 20), "quick", 1)
	second, out2 := start()
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	waitFor(t, "the job", 30*time.Second, func() bool { return finished(e.job(job.ID)) })
	j := e.job(job.ID)
	agents, err := e.st.ListAgents(context.Background())
	if err != nil || len(agents) != 1 || j.AgentID != saved.AgentID || j.Status != jobstate.Succeeded {
		t.Fatalf("agents %+v (%v); job ran by %d (%s), want one row %d\n%s", agents, err, j.AgentID, j.Status, saved.AgentID, out2)
	}
	if strings.Contains(out2.String(), "registered with the server") {
		t.Errorf("the restarted agent registered again:\n%s", out2)
	}

	// The old variable name still works, with a warning.
	cmd := exec.Command(perfgateBin, "agent", "--server", e.url(), "--labels", "gpu", "--fake-gpu", "GPU-old", "--name", "old-name", "--cache-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "PERFGATE_REGISTRATION_TOKEN="+regToken)
	old := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = old, old
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "the old-name agent to register", 20*time.Second, func() bool {
		as, _ := e.st.ListAgents(context.Background())
		return len(as) == 2
	})
	if !strings.Contains(old.String(), "PERFGATE_REGISTRATION_TOKEN is deprecated") {
		t.Errorf("no deprecation warning:\n%s", old)
	}
}

// syncBuffer is an output buffer a test may read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
