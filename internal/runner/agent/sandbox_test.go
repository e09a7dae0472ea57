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

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// needDocker skips without a Docker daemon, except under CI=1, where the
// sandbox must be tested.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the real-Docker tests take a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no Docker daemon reachable (%v: %s): the sandboxed-engine test needs one", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so it may not skip")
		}
		t.Skip(msg)
	}
}

var static struct {
	once sync.Once
	bin  string
	base string // image id: FROM scratch, /perfgate
	err  error
}

// staticBase builds a static perfgate (the relay's binary too) and the
// pinned base image a repository's build starts FROM: scratch + perfgate.
func staticBase(t *testing.T) (bin, base string) {
	t.Helper()
	static.once.Do(func() {
		static.err = func() error {
			dir, err := os.MkdirTemp("", "perfgate-agent-static-")
			if err != nil {
				return err
			}
			static.bin = filepath.Join(dir, "perfgate")
			cmd := exec.Command("go", "build", "-trimpath", "-o", static.bin, "github.com/perfgate/perfgate/cmd/perfgate")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("static build: %w\n%s", err, out)
			}
			if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY perfgate /perfgate\n"), 0o644); err != nil {
				return err
			}
			if out, err := exec.Command("docker", "build", "--quiet", "--tag", "perfgate-agent-test-base:latest", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("docker build: %w\n%s", err, out)
			}
			id, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", "perfgate-agent-test-base:latest").Output()
			static.base = strings.TrimSpace(string(id))
			return err
		}()
	})
	if static.err != nil {
		t.Fatal(static.err)
	}
	return static.bin, static.base
}

// TestImageEngineInSandbox: the whole runner path with a real Docker
// daemon. An interleaved job whose engine is the pinned base image plus a
// build of each commit (the repository's Dockerfile, built with no
// network): the agent fetches both trees through the server, builds each
// once, runs each build in the sandbox with the checkout at /workspace,
// reaches it through the relay, and records base image, build and
// containment; the head's build is the slow one.
func TestImageEngineInSandbox(t *testing.T) {
	needDocker(t)
	bin, base := staticBase(t)
	dockerfile := func(slowdown string) string {
		return "ARG BASE\nFROM ${BASE}\nENTRYPOINT [\"/perfgate\", \"sim\", \"--addr\", \"0.0.0.0:8000\", \"--no-noise\", \"--decode-step\", \"8ms\", \"--slowdown\", \"" + slowdown + "\"]\n"
	}
	r := newRepo(t)
	r.write("Dockerfile", dockerfile("1.0"))
	baseSHA := r.commit("engine")
	r.write("Dockerfile", dockerfile("2.0"))
	headSHA := r.commit("a slower engine")

	e := newEnv(t, 30*time.Second)
	e.withGitHub(r)
	p := plan(agentapi.SimEngine{}, 30, 0, 5, 0)
	p.HeadSHA, p.BaseSHA = headSHA, baseSHA
	p.Interleave = &agentapi.Interleave{Pairs: 2}
	p.Workload.MaxConcurrency = 4
	p.Engine = agentapi.Engine{Image: base, Model: "perfgate-sim", StartTimeout: agentapi.Duration(time.Minute),
		Build: &agentapi.Build{Command: []string{"docker", "build", "--quiet", "--build-arg", "BASE={{.Image}}", "-t", "perfgate-agent-test-engine:{{.SHA}}", "."},
			Image: "perfgate-agent-test-engine:{{.SHA}}", Timeout: agentapi.Duration(2 * time.Minute)}}
	t.Cleanup(func() {
		_ = exec.Command("docker", "image", "rm", "perfgate-agent-test-engine:"+baseSHA, "perfgate-agent-test-engine:"+headSHA).Run()
	})
	job := e.enqueueAt(p, "merge", 1)
	e.runAgentWith("docker-host", "GPU-docker", func(c *agent.Config) {
		c.RelayBin, c.NoGPUDevices = bin, true // no allow_uncontained: the sandbox is the only way
		c.BuildHost = agent.SealedBuilderHost(t)
	})
	waitFor(t, "the sandboxed job", 4*time.Minute, func() bool { return finished(e.job(job.ID)) })
	j := e.job(job.ID)
	if j.Status != jobstate.Succeeded {
		t.Fatalf("job: %s %q\n%s", j.Status, j.FailureReason, e.log(job.ID))
	}
	builds := map[string]string{}
	tpot := map[string]float64{}
	for _, rs := range e.results(job.ID) {
		var env result.Environment
		if err := json.Unmarshal(rs.Environment, &env); err != nil {
			t.Fatal(err)
		}
		if env.Sandbox != "container" || env.EngineImage != base || env.EngineBuild == "" || env.SourceTree == "" {
			t.Errorf("%s run: sandbox %q image %q build %q tree %q", rs.Side, env.Sandbox, env.EngineImage, env.EngineBuild, env.SourceTree)
		}
		if b, ok := builds[rs.Side]; ok && b != env.EngineBuild {
			t.Errorf("%s runs ran two builds: %s and %s", rs.Side, b, env.EngineBuild)
		}
		builds[rs.Side] = env.EngineBuild
		res, err := result.Parse(rs.Samples)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := res.Metric("median_tpot_ms")
		tpot[rs.Side] += v / 2
	}
	if builds["base"] == builds["head"] {
		t.Errorf("base and head ran the same build %s", builds["base"])
	}
	t.Logf("median TPOT in the sandbox: base %.2f ms, head %.2f ms", tpot["base"], tpot["head"])
	if tpot["head"] < 1.3*tpot["base"] {
		t.Errorf("the head's build (slowdown 2.0) was not the slower one: %v", tpot)
	}
	log := e.log(job.ID)
	if n := strings.Count(log, `"message":"build starting"`); n != 2 {
		t.Errorf("%d builds, want one per commit (the second start of base reuses its build)", n)
	}
	if !strings.Contains(log, "--network=none") || !strings.Contains(log, "--read-only") {
		t.Errorf("job log shows neither the contained build nor the contained engine:\n%s", log)
	}
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=perfgate.agent=docker-host").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left after the job: %q %v", out, err)
	}
}
