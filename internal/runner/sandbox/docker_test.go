package sandbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// The real sandbox: these tests need a Docker daemon. Without one they
// skip with a message, except under CI=1, where the sandbox must be tested
// and they fail. No registry is needed: the engine image is built FROM
// scratch with a static perfgate that runs the sim, plus the probe.

// needDocker skips (or, in CI, fails) when no daemon answers.
func needDocker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the real-Docker sandbox tests take a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("no Docker daemon reachable (docker version: %v: %s): the sandbox tests need one", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so they may not skip (.ci/run starts dockerd)")
		}
		t.Skip(msg)
	}
}

// images are built once per test binary.
var images struct {
	once   sync.Once
	err    error
	engine string // image id: /perfgate sim on :8000, and /probe
	relay  string
	bin    string // the static perfgate
}

func buildImages(t testing.TB) (engineImage, relayImage string) {
	t.Helper()
	images.once.Do(func() {
		images.err = func() error {
			dir, err := os.MkdirTemp("", "perfgate-sandbox-test-")
			if err != nil {
				return err
			}
			root, err := repoRoot()
			if err != nil {
				return err
			}
			for _, b := range []struct{ out, pkg string }{{"perfgate", "./cmd/perfgate"}, {"probe", "./internal/runner/sandbox/testdata/probe"}} {
				cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.out), b.pkg)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("static build of %s: %w\n%s", b.pkg, err, out)
				}
			}
			images.bin = filepath.Join(dir, "perfgate")
			df := "FROM scratch\nCOPY perfgate /perfgate\nCOPY probe /probe\nENTRYPOINT [\"/perfgate\", \"sim\", \"--addr\", \"0.0.0.0:8000\"]\n"
			if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
				return err
			}
			out, err := exec.Command("docker", "build", "--quiet", "--label", "perfgate.test=sandbox", "--tag", "perfgate-sandbox-test:latest", dir).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker build: %w\n%s", err, out)
			}
			id, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", "perfgate-sandbox-test:latest").Output()
			if err != nil {
				return fmt.Errorf("docker image inspect: %w", err)
			}
			images.engine = strings.TrimSpace(string(id))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			images.relay, err = sandbox.EnsureRelayImage(ctx, "docker", images.bin)
			return err
		}()
	})
	if images.err != nil {
		t.Fatal(images.err)
	}
	return images.engine, images.relay
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// report is the probe's JSON (testdata/probe).
type report struct {
	UID            int               `json:"uid"`
	Dials          map[string]string `json:"dials"`
	WriteRoot      string            `json:"write_root"`
	WriteWorkspace string            `json:"write_workspace"`
	WriteModels    string            `json:"write_models"`
	WriteTmp       string            `json:"write_tmp"`
	Env            []string          `json:"env"`
	TokenFoundIn   []string          `json:"token_found_in"`
	NoFile         string            `json:"nofile"`
	NProc          string            `json:"nproc"`
	Core           string            `json:"core"`
	CPUQuota       string            `json:"cpu_quota"`
	CPUsAllowed    string            `json:"cpus_allowed"`
	CapEff         string            `json:"cap_eff"`
	NoNewPrivs     string            `json:"no_new_privs"`
	Routes         []string          `json:"routes"`
	DockerSocket   bool              `json:"docker_socket"`
	Workspace      []string          `json:"workspace"`
}

func probe(t *testing.T, container, token string, dials []string, gatewayPorts ...string) report {
	t.Helper()
	return probeAt(t, container, "/probe", token, dials, gatewayPorts...)
}

// probeAt runs the probe found at path inside the container.
func probeAt(t *testing.T, container, path, token string, dials []string, gatewayPorts ...string) report {
	t.Helper()
	out, err := exec.Command("docker", "exec", container, path, "--token", token, "--dial", strings.Join(dials, ","),
		"--gateway-ports", strings.Join(gatewayPorts, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec probe: %v\n%s", err, out)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("probe output: %v\n%s", err, out)
	}
	return r
}

// hostAddrs are this host's IPv4 addresses: where the agent API, or any
// other service of the host, would answer a container that can reach it.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "pga_" + hex.EncodeToString(b)
}

// TestSandboxContains starts the sim engine in the sandbox through
// engine.Start, as the agent does, and checks from inside its container
// that the agent API, the host and the outside are unreachable, the root
// filesystem and the checkout are read-only, the user is nobody without
// capabilities, and neither the environment nor any file holds a
// PERFGATE_* variable or the agent token; and, as a control, that the same
// probe on Docker's default network does reach the host.
func TestSandboxContains(t *testing.T) {
	needDocker(t)
	begin := time.Now()
	engineImage, relayImage := buildImages(t)
	t.Logf("images ready after %s", time.Since(begin).Round(time.Millisecond))
	token := randomToken(t)
	t.Setenv("PERFGATE_AGENT_TOKEN", token)
	t.Setenv("PERFGATE_AGENT_REGISTRATION_TOKEN", "reg-"+token)

	// The agent API, as in a one-host install: on loopback here (tests
	// listen on 127.0.0.1 only); the host's other addresses show whether
	// the host itself answers (a refused connection is an answer).
	api := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "agent API") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go api.Serve(ln)
	t.Cleanup(func() { api.Close() })
	_, apiPort, _ := net.SplitHostPort(ln.Addr().String())

	checkout := filepath.Join(t.TempDir(), "tree")
	models := filepath.Join(t.TempDir(), "models")
	for _, d := range []string{checkout, models} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(checkout, "engine.yaml"), []byte("slowdown: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := "sbx-" + token[4:12]
	spec := engine.Spec{Image: engineImage, Model: "perfgate-sim", JobID: job, Agent: "sandbox-test", NoGPU: true,
		RelayImage: relayImage, Workdir: checkout, SHA: "abc123", ModelsDir: models,
		Env: map[string]string{"ENGINE_SETTING": "1"}, StartTimeout: 2 * time.Minute, StopGrace: 5 * time.Second}
	ctx := context.Background()
	srv, err := engine.Start(ctx, spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop(context.Background())
		}
	})
	t.Logf("sandboxed engine ready after %s (docker run to /health and /v1/models)", srv.StartupDuration().Round(time.Millisecond))
	// Served through the relay on the published loopback port.
	resp, err := http.Get(srv.BaseURL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	r := probeContained(t, engine.ContainerName(job), "/probe", token, apiPort)
	if !strings.Contains(strings.Join(r.Env, " "), "ENGINE_SETTING=1") {
		t.Errorf("the plan's variable is missing: %v", r.Env)
	}
	if len(r.TokenFoundIn) > 0 {
		t.Errorf("the agent token is readable inside the sandbox: %v", r.TokenFoundIn)
	}
	if strings.Join(r.Workspace, " ") != "/workspace/engine.yaml" {
		t.Errorf("/workspace holds %v, want the checkout", r.Workspace)
	}

	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, args := range [][]string{{"ps", "-aq", "--filter", "label=perfgate.job=" + job}, {"network", "ls", "-q", "--filter", "label=perfgate.job=" + job}} {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("docker %v after Stop: %q %v, want nothing left", args, out, err)
		}
	}

	// The control: the same probe on Docker's default bridge reaches the
	// host, so the checks above can fail.
	name := "perfgate-sandbox-control-" + token[4:12]
	out, err := exec.Command("docker", "run", "--detach", "--rm", "--name", name, engineImage).CombinedOutput()
	if err != nil {
		t.Fatalf("control container: %v\n%s", err, out)
	}
	defer exec.Command("docker", "rm", "--force", name).Run()
	gw, err := exec.Command("docker", "network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", "bridge").Output()
	if err != nil {
		t.Fatal(err)
	}
	hostOnBridge := net.JoinHostPort(strings.TrimSpace(string(gw)), apiPort)
	control := probe(t, name, token, []string{hostOnBridge})
	if got := control.Dials[hostOnBridge]; got != "refused" && got != "connected" {
		t.Errorf("control: the host at %s is %q from the default bridge; the probe cannot tell reachable from not", hostOnBridge, got)
	}
}

// probeContained runs the probe (at probePath inside the container) and
// checks what the sandbox promises every engine: the agent API (on
// apiPort), the host, the gateways and the outside unreachable; the root
// filesystem, the checkout and the models read-only, the tmpfs scratch
// writable; nobody, no capabilities, no-new-privileges, no Docker socket;
// no PERFGATE_* variable and no token anywhere. It returns the report for
// the caller's own checks.
func probeContained(t *testing.T, container, probePath, token, apiPort string) report {
	t.Helper()
	dials := []string{net.JoinHostPort("127.0.0.1", apiPort), "203.0.113.1:80"}
	for _, a := range hostAddrs(t) {
		dials = append(dials, net.JoinHostPort(a, apiPort), net.JoinHostPort(a, "22"))
	}
	r := probeAt(t, container, probePath, token, dials, apiPort, "80")
	for addr, got := range r.Dials {
		// From inside, 127.0.0.1 is the container's own loopback: refused
		// there says nothing of the host. Anywhere else, refused means the
		// host (or something) answered.
		if got == "connected" || (got == "refused" && !strings.HasPrefix(addr, "127.")) {
			t.Errorf("from inside the sandbox %s is reachable (%s)", addr, got)
		}
	}
	// Docker gives the container a default route even on an internal
	// network; its gateway has no owner (inhibit_ipv4), which the dials to
	// every gateway above show.
	gateways := 0
	for addr := range r.Dials {
		for _, route := range r.Routes {
			if gw := route[strings.LastIndex(route, " ")+1:]; gw != "0.0.0.0" && strings.HasPrefix(addr, gw+":") {
				gateways++
			}
		}
	}
	if gateways == 0 {
		t.Errorf("no gateway was tried (routes %v, dials %v)", r.Routes, r.Dials)
	}
	t.Logf("inside the sandbox: routes %v; dials %v", r.Routes, r.Dials)
	for what, msg := range map[string]string{"/": r.WriteRoot, "/workspace": r.WriteWorkspace, "/models": r.WriteModels} {
		if !strings.Contains(msg, "read-only file system") {
			t.Errorf("writing under %s: %q, want read-only file system", what, msg)
		}
	}
	if r.WriteTmp != "" {
		t.Errorf("the tmpfs scratch is not writable: %s", r.WriteTmp)
	}
	if r.UID != 65534 || r.CapEff != "0000000000000000" || r.NoNewPrivs != "1" || r.DockerSocket {
		t.Errorf("uid %d, CapEff %s, NoNewPrivs %s, docker socket %v; want nobody, no capabilities, no-new-privileges, no socket", r.UID, r.CapEff, r.NoNewPrivs, r.DockerSocket)
	}
	for _, kv := range r.Env {
		if strings.HasPrefix(kv, "PERFGATE_") {
			t.Errorf("the engine's environment holds %s", kv)
		}
	}
	return r
}

// BenchmarkEngineStart is the start-up cost the sandbox adds per engine
// start: "plain" is `docker run -p` of the same image to /health, as an
// uncontained image would start; "sandbox" is engine.Start (network,
// contained container, relay, /health and /v1/models). Each op also stops
// the engine; ms/start is the start alone.
//
//	go test -run XXX -bench EngineStart -benchtime 10x ./internal/runner/sandbox
func BenchmarkEngineStart(b *testing.B) {
	needDocker(b)
	engineImage, relayImage := buildImages(b)
	b.Run("plain", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			name := fmt.Sprintf("perfgate-bench-plain-%d", i)
			start := time.Now()
			if out, err := exec.Command("docker", "run", "--detach", "--rm", "--name", name, "-p", fmt.Sprintf("127.0.0.1:%d:8000", port), engineImage).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			for {
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						break
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			total += time.Since(start)
			_ = exec.Command("docker", "rm", "--force", name).Run()
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
	})
	b.Run("sandbox", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			spec := engine.Spec{Image: engineImage, Model: "perfgate-sim", JobID: fmt.Sprintf("bench-%d", i), Agent: "bench", NoGPU: true,
				RelayImage: relayImage, StartTimeout: time.Minute, StopGrace: time.Second}
			start := time.Now()
			srv, err := engine.Start(context.Background(), spec, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
			if err := srv.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
	})
}

// TestEngineLimits: an engine container is bounded where a measurement
// and the host need it, seen from inside: its CPU quota and the CPUs of
// its card, its open-file, process and core ulimits; and what Docker
// keeps of its output stays under the log cap however much it writes.
func TestEngineLimits(t *testing.T) {
	needDocker(t)
	engineImage, _ := buildImages(t)
	p := sandbox.Policy{Memory: "512m", CPUs: "1", CPUSets: map[string]string{"GPU-limits-test": "0"},
		NoFile: 4096, NProc: 50000, LogMaxSize: "1m", LogMaxFiles: 2}
	name := "perfgate-limits-test-" + randomToken(t)[4:12]
	argv := p.RunArgv(sandbox.Container{Name: name, Job: name, Agent: "limits-test", Network: "none", Image: engineImage, Card: "GPU-limits-test",
		Args: []string{"--spew", "8000000"}})
	// Detached, with the probe as the entrypoint: it writes 8 MB and
	// lingers so its limits and its log can be read.
	img := -1
	for i, a := range argv {
		if a == engineImage {
			img = i
		}
	}
	argv = append(append(append([]string{"run", "--detach"}, argv[1:img]...), "--entrypoint", "/probe"), argv[img:]...)
	if out, err := exec.Command("docker", argv...).CombinedOutput(); err != nil {
		t.Fatalf("docker %v: %v\n%s", argv, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for exec.CommandContext(ctx, "docker", "exec", name, "/probe", "--exists", "/tmp/spew-done").Run() != nil {
		if ctx.Err() != nil {
			t.Fatal("the probe never finished writing")
		}
	}
	r := probe(t, name, "", nil)
	for what, got := range map[string][2]string{
		"nofile":       {r.NoFile, "4096:4096"},
		"nproc":        {r.NProc, "50000:50000"},
		"core":         {r.Core, "0:0"},
		"cpu quota":    {r.CPUQuota, "100000/100000"},
		"cpus allowed": {r.CPUsAllowed, "0"},
	} {
		if got[0] != got[1] {
			t.Errorf("%s inside the engine = %q, want %q", what, got[0], got[1])
		}
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{.LogPath}}", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	logPath := strings.TrimSpace(string(out))
	var total int64
	files, _ := filepath.Glob(logPath + "*")
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			total += fi.Size()
		}
	}
	t.Logf("the engine wrote 8 MB; Docker keeps %d bytes in %d files", total, len(files))
	if total > 3<<20 || total < 512<<10 {
		t.Errorf("Docker's log of the engine holds %d bytes in %v; want between 0.5 MiB and the 2×1 MiB cap (plus slack)", total, files)
	}
}

// TestDefaultPolicyStarts: an image engine starts with the agent's
// default flags (the zero Policy, TestEngineLimitFlags in cmd/perfgate)
// and with the limits the agent passed before they were fitted to the
// host (65536 open files and processes, more CPUs than the host has),
// on a host whose open-file hard limit may be below 65536 (20000 on the
// development machine, where `--ulimit nofile=65536:65536` failed every
// start with "error setting rlimit type 7: operation not permitted"). From
// inside, the engine's ulimits are what Fit chose.
func TestDefaultPolicyStarts(t *testing.T) {
	needDocker(t)
	engineImage, relayImage := buildImages(t)
	h := sandbox.CurrentHost()
	t.Logf("host limits: open files %d, processes %d, CPUs %d, from %s", h.NoFile, h.NProc, h.CPUs, h.From)
	for i, tc := range []struct {
		name   string
		policy sandbox.Policy
	}{
		{"the agent's default flags", sandbox.Policy{}},
		{"the old explicit defaults", sandbox.Policy{NoFile: sandbox.DefaultNoFile, NProc: sandbox.DefaultNProc, CPUs: "4096"}},
	} {
		want, _ := tc.policy.Fit(h)
		job := fmt.Sprintf("defaults-%d-%s", i, randomToken(t)[4:12])
		spec := engine.Spec{Image: engineImage, Model: "perfgate-sim", JobID: job, Agent: "defaults-test", NoGPU: true,
			RelayImage: relayImage, Sandbox: tc.policy, StartTimeout: 2 * time.Minute, StopGrace: 5 * time.Second}
		srv, err := engine.Start(context.Background(), spec, zerolog.Nop())
		if err != nil {
			t.Errorf("%s: the engine did not start: %v", tc.name, err)
			continue
		}
		r := probe(t, engine.ContainerName(job), "", nil)
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("%s: stop: %v", tc.name, err)
		}
		t.Logf("%s: ready after %s; inside: nofile %s, nproc %s, CPU quota %s", tc.name, srv.StartupDuration().Round(time.Millisecond), r.NoFile, r.NProc, r.CPUQuota)
		if w := fmt.Sprintf("%d:%d", want.NoFile, want.NoFile); r.NoFile != w {
			t.Errorf("%s: nofile inside %q, want %q", tc.name, r.NoFile, w)
		}
		if w := fmt.Sprintf("%d:%d", want.NProc, want.NProc); r.NProc != w {
			t.Errorf("%s: nproc inside %q, want %q", tc.name, r.NProc, w)
		}
		if h.NoFile > 0 && uint64(want.NoFile) > h.NoFile {
			t.Errorf("%s: nofile %d above the host's hard limit %d", tc.name, want.NoFile, h.NoFile)
		}
	}
}
