package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

const testDigest = "vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestDockerArgv: an image engine's `docker run` line carries the whole
// sandbox: its own internal network and no published port, read-only root
// with tmpfs scratch, nobody, no capabilities, no-new-privileges, pids and
// memory limits, only the job's GPU, the checkout and models read-only,
// no docker socket, and none of the agent's variables.
func TestDockerArgv(t *testing.T) {
	t.Setenv("PERFGATE_AGENT_TOKEN", "pga_secret")
	s := Spec{
		Image: testDigest, Model: "meta-llama/Llama-3.1-8B-Instruct",
		Args:    []string{"--max-num-seqs", "256", "--config", "{{.Workdir}}/engine.yaml", "--port", "{{.Port}}", "--download-dir", "{{.Models}}"},
		GPUUUID: "GPU-5a1b2c3d-0000-1111-2222-333344445555", JobID: "42/merge", Agent: "host-a",
		Env:     map[string]string{"VLLM_LOGGING_LEVEL": "INFO", "A": "1"},
		Workdir: "/var/cache/perfgate/abc/tree", SHA: "abc", ModelsDir: "/srv/models", RelayImage: "sha256:relay",
		Sandbox: sandbox.Policy{Memory: "64g", CPUs: "12", NoFile: 65536, CPUSets: map[string]string{"GPU-5a1b2c3d-0000-1111-2222-333344445555": "0-11"},
			Host: &sandbox.Host{NoFile: 1 << 20, NProc: 1 << 20, CPUs: 64, MemoryBytes: 256 << 30}},
	}.withDefaults()
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{"docker", "run", "--rm",
		"--name", "perfgate-42-merge",
		"--label", "perfgate.job=42/merge",
		"--label", "perfgate.agent=host-a",
		"--network", "perfgate-42-merge",
		"--read-only",
		"--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=16g",
		"--user", "65534:65534",
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--pids-limit", "16384",
		"--memory", "64g", "--memory-swap", "64g",
		"--shm-size", "16g",
		"--cpus", "12",
		"--ulimit", "nofile=65536:65536", "--ulimit", "nproc=65536:65536", "--ulimit", "core=0:0",
		"--log-driver", "json-file", "--log-opt", "max-size=10m", "--log-opt", "max-file=2",
		"--cpuset-cpus", "0-11",
		"--gpus", `"device=GPU-5a1b2c3d-0000-1111-2222-333344445555"`,
		"--mount", "type=bind,source=/var/cache/perfgate/abc/tree,target=/workspace,readonly",
		"--mount", "type=bind,source=/srv/models,target=/models,readonly",
		"--workdir", "/workspace",
		"--env", "A=1", "--env", "HF_HUB_OFFLINE=1", "--env", "HOME=/tmp", "--env", "VLLM_LOGGING_LEVEL=INFO",
		testDigest, "--model", "meta-llama/Llama-3.1-8B-Instruct",
		"--max-num-seqs", "256", "--config", "/workspace/engine.yaml", "--port", "8000", "--download-dir", "/models"}
	got, err := s.dockerArgv()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("argv\n got %q\nwant %q", got, want)
	}
	line := strings.Join(got, " ")
	for _, never := range []string{"-p ", "--publish", "--ipc=host", "--privileged", "docker.sock", "PERFGATE", "pga_secret", "--network host"} {
		if strings.Contains(line, never) {
			t.Errorf("docker run line holds %q: %s", never, line)
		}
	}
	// A local image id (what a build step makes) is pinned too.
	s.Image = "sha256:" + strings.Repeat("ab", 32)
	if err := s.validate(); err != nil {
		t.Errorf("image id refused: %v", err)
	}
}

func TestSpecValidation(t *testing.T) {
	image := Spec{Image: testDigest, Model: "m", GPUUUID: "GPU-a", JobID: "1", RelayImage: "sha256:relay"}
	tests := []struct {
		name string
		edit func(*Spec)
		want string // "" = valid
	}{
		{"pinned image", func(*Spec) {}, ""},
		{"tag refused", func(s *Spec) { s.Image = "vllm/vllm-openai:v0.6.3" }, "not pinned by digest"},
		{"tag and digest without full digest", func(s *Spec) { s.Image = "vllm/vllm-openai@sha256:abc" }, "not pinned by digest"},
		{"latest refused", func(s *Spec) { s.Image = "vllm/vllm-openai" }, "not pinned by digest"},
		{"GPU index refused", func(s *Spec) { s.GPUUUID = "0" }, "is an index: select the GPU by UUID"},
		{"GPU list refused", func(s *Spec) { s.GPUUUID = "GPU-a,GPU-b" }, "is not one UUID"},
		{"image needs a GPU", func(s *Spec) { s.GPUUUID = "" }, "needs a GPU UUID"},
		{"image needs a job id", func(s *Spec) { s.JobID = "" }, "needs a job id"},
		{"image and command", func(s *Spec) { s.Command = []string{"vllm"} }, "both an image and a command"},
		{"neither", func(s *Spec) { s.Image = "" }, "neither an image nor a command"},
		{"command without GPU is fine", func(s *Spec) { s.Image, s.GPUUUID, s.Command = "", "", []string{"sim"} }, ""},
		{"bad env name", func(s *Spec) { s.Env = map[string]string{"A=B": "x"} }, "not valid"},
		{"agent variables refused", func(s *Spec) { s.Env = map[string]string{"PERFGATE_AGENT_TOKEN": "x"} }, "PERFGATE_AGENT_TOKEN: PERFGATE_* variables are the runner's own"},
		{"image needs the relay", func(s *Spec) { s.RelayImage = "" }, "needs the sandbox relay image"},
		{"no GPU only when asked", func(s *Spec) { s.GPUUUID, s.NoGPU = "", true }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := image
			tt.edit(&s)
			err := s.withDefaults().validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	// Start refuses before running anything.
	if _, err := Start(context.Background(), Spec{Image: "vllm/vllm-openai:latest", Model: "m", GPUUUID: "GPU-a", JobID: "1", DockerBinary: "/nonexistent"}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Fatalf("Start with a tag: %v", err)
	}
}

func TestCommandArgv(t *testing.T) {
	s := Spec{Command: []string{"vllm", "serve", "{{.Model}}", "--port={{.Port}}"}, Args: []string{"--tag={{.JobID}}@{{.GPU}}", "--src={{.Workdir}}@{{.SHA}}", "--weights={{.Models}}"},
		Model: "m1", GPUUUID: "GPU-x", JobID: "j9", Workdir: "/cache/abc/tree", SHA: "abc", ModelsDir: "/srv/models",
		Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}}
	got, err := s.commandArgv(9001)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vllm", "serve", "m1", "--port=9001", "--tag=j9@GPU-x", "--src=/cache/abc/tree@abc", "--weights=/srv/models"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("argv %q, want %q", got, want)
	}
	env := s.commandEnv()
	if last := env[len(env)-1]; last != "CUDA_VISIBLE_DEVICES=GPU-x" {
		t.Fatalf("the GPU pin must come last so nothing overrides it; last is %q", last)
	}
	for _, bad := range []string{"{{.Nope}}", "{{.Port"} {
		if _, err := (Spec{Command: []string{"x", bad}}).commandArgv(1); err == nil {
			t.Errorf("template %q rendered", bad)
		}
	}
}

// TestCommandEnvAllowList: a command engine gets the allow-listed part of
// the agent's environment and never its PERFGATE_* variables or token,
// checked in the environment the started process really has.
func TestCommandEnvAllowList(t *testing.T) {
	t.Setenv("PERFGATE_AGENT_TOKEN", "pga_0123456789")
	t.Setenv("PERFGATE_AGENT_REGISTRATION_TOKEN", "reg-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
	t.Setenv("LANG", "C.UTF-8")
	spec, _ := cmdSpec(t, "sim")
	dump := filepath.Join(t.TempDir(), "env")
	spec.Env[envDumpEnv] = dump
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, never := range []string{"PERFGATE_", "pga_0123456789", "reg-secret", "aws-secret"} {
		if strings.Contains(env, never) {
			t.Errorf("the engine's environment holds %q:\n%s", never, env)
		}
	}
	for _, want := range []string{"LANG=C.UTF-8", "HF_HUB_OFFLINE=1", "CUDA_VISIBLE_DEVICES=GPU-test-0", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("the engine's environment lacks %q:\n%s", want, env)
		}
	}
}

// cmdSpec is a command engine played by this test binary in mode.
func cmdSpec(t *testing.T, mode string) (Spec, string) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	return Spec{
		Command:      []string{testExe(t), "{{.Port}}", "{{.Model}}"},
		Model:        "perfgate-sim",
		GPUUUID:      "GPU-test-0",
		StartTimeout: 20 * time.Second,
		StopGrace:    5 * time.Second,
		Env:          map[string]string{childEnv: mode, pidFileEnv: pidFile},
	}, pidFile
}

func TestStartReadyAndStop(t *testing.T) {
	spec, pidFile := cmdSpec(t, "sim")
	spec.Env[delayEnv] = "300ms" // /health answers 503 first
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	resp, err := http.Get(srv.BaseURL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/models: %d", resp.StatusCode)
	}
	if srv.StartupDuration() <= 0 || srv.PID() != srv.ClientPID() || srv.PID() != readPIDs(t, pidFile)[0] {
		t.Fatalf("startup %s pid %d client %d", srv.StartupDuration(), srv.PID(), srv.ClientPID())
	}
	logs := string(srv.Logs())
	for _, want := range []string{"perfgate sim listening on http://127.0.0.1:" + strconv.Itoa(srv.Port()), "CUDA_VISIBLE_DEVICES=GPU-test-0", "HF_HUB_OFFLINE=1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if err := srv.CrashError(); err != nil {
		t.Fatalf("running server reports a crash: %v", err)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, srv.PID())
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name  string
		mode  string
		edit  func(*Spec)
		wants []string
	}{
		{name: "never ready", mode: "never-ready", edit: func(s *Spec) { s.StartTimeout = 1500 * time.Millisecond },
			wants: []string{"engine not ready after 1.5s", "GET /health: 503 Service Unavailable", "loading weights..."}},
		{name: "exits at once", mode: "exit-at-once",
			wants: []string{"engine exited during start-up", "exit status 1", "CUDA error: out of memory"}},
		{name: "serves another model", mode: "sim", edit: func(s *Spec) { s.Command[2] = "other-model"; s.Model = "wanted" },
			wants: []string{`does not list model "wanted" (it serves "other-model")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, pidFile := cmdSpec(t, tt.mode)
			if tt.edit != nil {
				tt.edit(&spec)
			}
			srv, err := Start(context.Background(), spec, zerolog.Nop())
			if err == nil {
				srv.Stop(context.Background())
				t.Fatal("Start succeeded")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// A failed start frees the GPU: the process is gone.
			assertGone(t, readPIDs(t, pidFile)...)
		})
	}
}

func TestStartCancelled(t *testing.T) {
	spec, pidFile := cmdSpec(t, "never-ready")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !fileHasPID(pidFile) {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := Start(ctx, spec, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err %v", err)
	}
	assertGone(t, readPIDs(t, pidFile)...)
}

func TestCrashAfterReady(t *testing.T) {
	spec, _ := cmdSpec(t, "crash-after-ready")
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	if resp, err := http.Get(srv.BaseURL() + "/crash"); err == nil {
		resp.Body.Close()
	}
	select {
	case <-srv.Exited():
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("crash not noticed")
	}
	cerr := srv.CrashError()
	if cerr == nil || !strings.Contains(cerr.Error(), "exit status 2") || !strings.Contains(cerr.Error(), "engine worker died") {
		t.Fatalf("crash error %v", cerr)
	}
	if srv.ExitErr() == nil {
		t.Fatal("ExitErr nil after a crash")
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after crash: %v", err)
	}
}

func TestStopKillsTheGroup(t *testing.T) {
	spec, pidFile := cmdSpec(t, "group")
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, pidFile)
	if len(pids) != 2 {
		t.Fatalf("pids %v: want the server and its worker", pids)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids...)
}

func TestStopEscalatesToKill(t *testing.T) {
	spec, pidFile := cmdSpec(t, "ignore-term")
	spec.StopGrace = 300 * time.Millisecond
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, readPIDs(t, pidFile)...)
	if ws, ok := srv.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended by %v, want SIGKILL", srv.cmd.ProcessState)
	}
}

// imageSpec is an image engine run through the fake docker CLI.
func imageSpec(t *testing.T, jobID string) (Spec, string) {
	dir := t.TempDir()
	t.Setenv(childEnv, "docker")
	t.Setenv(fakeDockerEnv, dir)
	return Spec{Image: testDigest, Model: "perfgate-sim", GPUUUID: "GPU-img-1", JobID: jobID, Agent: "a1",
		DockerBinary: testExe(t), StartTimeout: 20 * time.Second, StopGrace: 2 * time.Second, RelayImage: "sha256:relay",
		AllowEnv: []string{childEnv, fakeDockerEnv}}, dir
}

// TestImageMode runs Start and Stop against a fake docker CLI: the sandbox
// network, the engine's argv, the relay publishing its port, the container
// PID and the stop sequence, network last.
func TestImageMode(t *testing.T) {
	spec, dir := imageSpec(t, "job-7")
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var argv []string
	b, _ := os.ReadFile(filepath.Join(dir, "run.argv"))
	if err := json.Unmarshal(b, &argv); err != nil || argv[0] != "run" {
		t.Fatalf("docker run argv %q (%v)", argv, err)
	}
	line := strings.Join(argv, " ")
	for _, want := range []string{"--network perfgate-job-7", "--read-only", "--cap-drop ALL", "--gpus \"device=GPU-img-1\""} {
		if !strings.Contains(line, want) {
			t.Errorf("engine argv lacks %q: %s", want, line)
		}
	}
	// The engine answers through the relay on the published port.
	resp, err := http.Get(srv.BaseURL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if srv.PID() != srv.ClientPID() { // the fake's "container" is its run process
		t.Fatalf("container pid %d, want %d", srv.PID(), srv.ClientPID())
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	order := []string{
		"network create --driver bridge --internal --opt com.docker.network.bridge.inhibit_ipv4=true --label perfgate.job=job-7 --label perfgate.agent=a1 perfgate-job-7",
		`inspect --format {{with index .NetworkSettings.Networks "perfgate-job-7"}}{{.IPAddress}}{{end}} perfgate-job-7`,
		fmt.Sprintf("--publish 127.0.0.1:%d:8000", srv.Port()),
		"network connect perfgate-job-7 perfgate-job-7-relay",
		"inspect --format {{.State.Pid}} perfgate-job-7",
		"stop --time 2 perfgate-job-7", "rm -f perfgate-job-7", "rm --force perfgate-job-7-relay", "network rm perfgate-job-7",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(string(calls[at:]), want)
		if i < 0 {
			t.Fatalf("docker calls lack %q after position %d:\n%s", want, at, calls)
		}
		at += i + len(want)
	}
	assertGone(t, srv.ClientPID())
	if _, err := os.Stat(filepath.Join(dir, "perfgate-job-7.net")); !os.IsNotExist(err) {
		t.Errorf("sandbox network left behind: %v", err)
	}
}

func TestRemoveLeftovers(t *testing.T) {
	spec, dir := imageSpec(t, "left")
	spec.StopGrace = time.Second
	srv, err := Start(context.Background(), spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	n, err := RemoveLeftovers(context.Background(), testExe(t), "a1", zerolog.Nop())
	if err != nil || n != 2 {
		t.Fatalf("removed %d, %v; want 2 (the engine and its relay)", n, err)
	}
	select {
	case <-srv.Exited():
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("leftover container still running")
	}
	if _, err := os.Stat(filepath.Join(dir, "perfgate-left.net")); !os.IsNotExist(err) {
		t.Errorf("leftover network not removed: %v", err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if !strings.Contains(string(calls), "ps -aq --filter label=perfgate.job --filter label=perfgate.agent=a1") {
		t.Errorf("leftovers not filtered to this agent's:\n%s", calls)
	}
	// Stopping a container that is already gone is not an error.
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := RemoveLeftovers(context.Background(), testExe(t), "a1", zerolog.Nop()); err != nil || n != 0 {
		t.Fatalf("second pass removed %d, %v", n, err)
	}
}

func TestRingBuffer(t *testing.T) {
	tests := []struct {
		writes []string
		want   string
		tail2  string
	}{
		{[]string{"a\n", "b\n"}, "a\nb\n", "a\nb"},
		{[]string{"0123456789", "ab"}, "23456789ab", "23456789ab"},
		{[]string{"x\ny\n", "z\n", "w\nv\n"}, "x\ny\nz\nw\nv\n", "w\nv"},
		{[]string{"too long for the buffer\n"}, "too long for the buffer\n", "he buffer"},
		{[]string{"1\n2\n3\n4\n5", "\n6\n"}, "2\n3\n4\n5\n6\n", "5\n6"},
	}
	for i, tt := range tests {
		r := newRingBuffer(10)
		var total int
		for _, w := range tt.writes {
			r.Write([]byte(w))
			total += len(w)
		}
		if got := string(r.Bytes()); got != tt.want[max(0, len(tt.want)-10):] {
			t.Errorf("%d: bytes %q, want %q", i, got, tt.want)
		}
		if got := r.Tail(2); got != tt.tail2 {
			t.Errorf("%d: tail %q, want %q", i, got, tt.tail2)
		}
		if r.Total() != int64(total) {
			t.Errorf("%d: total %d, want %d", i, r.Total(), total)
		}
	}
}

func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("child wrote no pid file: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	return pids
}

func fileHasPID(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) > 0
}

// assertGone checks each process has exited (a zombie awaiting an absent
// reaper counts as gone: it holds no GPU memory).
func assertGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
