package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// agentImage is an image of the agent as it runs in a container: the
// static perfgate and the docker CLI (with the C library it links), FROM
// scratch, so no registry is needed.
func agentImage(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Fatal(err)
	}
	copies := map[string]string{bin: "/perfgate", docker: "/usr/bin/docker"}
	out, err := exec.Command("ldd", docker).Output()
	if err == nil { // a static CLI has no libraries to copy
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			for _, w := range f {
				if strings.HasPrefix(w, "/") {
					copies[w] = w
				}
			}
		}
	}
	var df strings.Builder
	df.WriteString("FROM scratch\n")
	i := 0
	for src, dst := range copies {
		name := fmt.Sprintf("f%d", i)
		i++
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&df, "COPY %s %s\n", name, dst)
	}
	df.WriteString("ENV HOME=/tmp\nENTRYPOINT [\"/perfgate\", \"agent\"]\n")
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "perfgate-agent-in-container-test:latest"
	if out, err := exec.Command("docker", "build", "--quiet", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build of the agent image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag).Run() })
	return tag
}

// TestContainerisedAgent: the agent in a container starts an image engine
// through the host's daemon. With its state directory mounted at the same
// path inside and outside, the job runs; mounted elsewhere, the daemon
// would look for the checkout at a host path that does not hold it, and
// the agent refuses the engine, naming the fix.
func TestContainerisedAgent(t *testing.T) {
	needDocker(t)
	bin, base := staticBase(t)
	image := agentImage(t, bin)
	// The agent in a container cannot start a daemon: it builds in the
	// sealed builder started on the host, whose socket's directory is
	// mounted at the same path.
	buildHost := agent.SealedBuilderHost(t)
	buildDir := filepath.Dir(strings.TrimPrefix(buildHost, "unix://"))
	r := newRepo(t)
	r.write("Dockerfile", "ARG BASE\nFROM ${BASE}\nENTRYPOINT [\"/perfgate\", \"sim\", \"--addr\", \"0.0.0.0:8000\", \"--no-noise\"]\n")
	sha := r.commit("engine")
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "perfgate-agent-ctr-engine:"+sha).Run() })

	for _, tc := range []struct {
		name string
		same bool
	}{
		{"same path", true},
		{"another path", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 30*time.Second)
			e.withGitHub(r)
			p := plan(agentapi.SimEngine{}, 10, 1, 0, 0)
			p.HeadSHA = sha
			p.Engine = agentapi.Engine{Image: base, Model: "perfgate-sim", StartTimeout: agentapi.Duration(time.Minute),
				Build: &agentapi.Build{Command: []string{"docker", "build", "--quiet", "--build-arg", "BASE={{.Image}}", "-t", "perfgate-agent-ctr-engine:{{.SHA}}", "."},
					Image: "perfgate-agent-ctr-engine:{{.SHA}}", Timeout: agentapi.Duration(2 * time.Minute)}}
			job := e.enqueueAt(p, "quick", 1)
			name := "ctr-" + strings.ReplaceAll(tc.name, " ", "-")
			token := e.register(name, "GPU-ctr")
			state, err := os.MkdirTemp("", "perfgate-agent-state-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(state) })
			if err := os.WriteFile(filepath.Join(state, "token"), []byte(token), 0o600); err != nil {
				t.Fatal(err)
			}
			inside := state
			if !tc.same {
				inside = "/state"
			}
			container := "perfgate-agent-ctr-" + filepath.Base(state)
			args := []string{"run", "--detach", "--name", container, "--network", "host", "--tmpfs", "/tmp",
				"-v", state + ":" + inside, "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", buildDir + ":" + buildDir,
				image, "--server", e.url(), "--build-host", buildHost, "--token-file", filepath.Join(inside, "token"), "--name", name, "--labels", "gpu",
				"--state-dir", inside, "--fake-gpu", "GPU-ctr", "--no-gpu-devices", "--sandbox-relay-bin", "/perfgate"}
			// No --engine-nofile: the default fits what the daemon grants
			// (inside a container the agent sees no dockerd, and its own
			// hard limit is one the daemon gave it).
			if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
				t.Fatalf("docker run of the agent: %v\n%s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", container).Run() })
			waitFor(t, "the job of the containerised agent", 4*time.Minute, func() bool { return finished(e.job(job.ID)) })
			j := e.job(job.ID)
			if tc.same {
				if j.Status != jobstate.Succeeded {
					logs, _ := exec.Command("docker", "logs", "--tail", "30", container).CombinedOutput()
					t.Fatalf("job: %s %q\n%s\nagent:\n%s", j.Status, j.FailureReason, e.log(job.ID), logs)
				}
				return
			}
			if j.Status != jobstate.Failed || !strings.Contains(j.FailureReason, "not mounted at the same path") {
				t.Fatalf("job: %s %q; want a refusal naming the same-path mount", j.Status, j.FailureReason)
			}
		})
	}
}
