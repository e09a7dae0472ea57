package deploy

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needDocker skips (or, under CI=1, fails) when no Docker daemon answers,
// as the sandbox tests do: CI starts dockerd (.ci/run).
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: building and running the server image takes a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("no Docker daemon reachable (docker version: %v: %s): the server image test needs one", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so it may not skip (.ci/run starts dockerd)")
		}
		t.Skip(msg)
	}
}

func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Dir = ".."
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestServerImage builds the server image as docs/install.md says, with
// no registry (deploy/image/prepare, then docker build --target server .
// at the repository's root), and runs it as the compose file does:
// read-only, every capability dropped, a volume for its data. perfgate
// healthcheck inside the container must pass, the server must have
// written its setup key into the volume as its own user, and the build
// must not have touched the agent's stage.
func TestServerImage(t *testing.T) {
	needDocker(t)
	prep := exec.Command("./image/prepare")
	prep.Env = append(os.Environ(), "VERSION=image-test")
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/prepare: %v\n%s", err, out)
	}
	tag := fmt.Sprintf("perfgate-server-test:%d", os.Getpid())
	out, err := docker(t, "build", "--target", "server", "-t", tag, ".")
	if err != nil {
		t.Fatalf("docker build --target server .: %v\n%s", err, out)
	}
	t.Cleanup(func() { docker(t, "rmi", "-f", tag) })
	for _, agentOnly := range []string{"AS agent", "deploy/image/agent"} {
		if strings.Contains(out, agentOnly) {
			t.Errorf("building the server touched the agent's stages (%q in the build log):\n%s", agentOnly, out)
		}
	}
	out, err = docker(t, "run", "-d", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--mount", "type=volume,dst=/var/lib/perfgate", "-e", "PERFGATE_PUBLIC_URL=https://perfgate.example.com", tag)
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { docker(t, "rm", "-f", "-v", id) })

	// The server is up once its own healthcheck passes; a container that
	// exits fails at once with its logs.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		hc, err := docker(t, "exec", id, "perfgate", "healthcheck")
		if err == nil {
			break
		}
		if state, _ := docker(t, "inspect", "--format", "{{.State.Status}}", id); strings.TrimSpace(state) != "running" || time.Now().After(deadline) {
			logs, _ := docker(t, "logs", id)
			t.Fatalf("perfgate healthcheck in the container: %v %s (container %s)\n%s", err, hc, strings.TrimSpace(state), logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v, err := docker(t, "exec", id, "perfgate", "version"); err != nil || !strings.HasPrefix(v, "perfgate image-test ") {
		t.Errorf("perfgate version in the image: %v %q", err, v)
	}
	if u, _ := docker(t, "inspect", "--format", "{{.Config.User}}", tag); strings.TrimSpace(u) != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", u)
	}
	for file, want := range map[string]string{
		"/etc/ssl/certs/ca-certificates.crt": "BEGIN CERTIFICATE",
		"/var/lib/perfgate/setup-key":        "", // written by the server: the volume is its user's
	} {
		body, err := copyOut(t, id, file)
		if err != nil || len(body) == 0 || !strings.Contains(body, want) {
			t.Errorf("%s in the container: %v (%d bytes)", file, err, len(body))
		}
	}
}

// copyOut reads one file from a container (docker cp writes a tar).
func copyOut(t *testing.T, id, path string) (string, error) {
	t.Helper()
	cmd := exec.Command("docker", "cp", id+":"+path, "-")
	raw, err := cmd.Output()
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	if _, err := tr.Next(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(tr)
	return string(b), err
}

// TestAgentImage builds the agent image as docs/install.md says, with no
// registry (deploy/image/prepare-agent, then docker build --target agent
// at the repository's root): nothing is pulled. Inside, perfgate has NVML
// compiled in, the relay binary is static, and the docker CLI reaches the
// host's daemon through its socket (the image's healthcheck); the image
// runs as 10001 and `perfgate agent` starts (refusing for want of a
// server, as it should).
func TestAgentImage(t *testing.T) {
	needDocker(t)
	prep := exec.Command("./image/prepare-agent")
	prep.Env = append(os.Environ(), "VERSION=image-test")
	if out, err := prep.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/prepare-agent: %v\n%s", err, out)
	}
	tag := fmt.Sprintf("perfgate-agent-test:%d", os.Getpid())
	begin := time.Now()
	out, err := docker(t, "build", "--target", "agent", "-t", tag, ".")
	if err != nil {
		t.Fatalf("docker build --target agent .: %v\n%s", err, out)
	}
	t.Cleanup(func() { docker(t, "rmi", "-f", tag) })
	t.Logf("docker build --target agent: %s", time.Since(begin).Round(time.Millisecond))
	for _, pulled := range []string{"Pulling", "pull access", "registry"} {
		if strings.Contains(out, pulled) {
			t.Errorf("the agent build reached for a registry (%q in its log):\n%s", pulled, out)
		}
	}
	gid := "0"
	if fi, err := os.Stat("/var/run/docker.sock"); err == nil {
		if st, ok := fileGID(fi); ok {
			gid = st
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"perfgate", []string{"--entrypoint", "perfgate", tag, "version"}, "NVML telemetry compiled in"},
		{"the static relay", []string{"--entrypoint", "/usr/local/lib/perfgate/relay", tag, "version"}, "perfgate image-test"},
		{"the healthcheck's docker CLI", []string{"-v", "/var/run/docker.sock:/var/run/docker.sock", "--group-add", gid,
			"--entrypoint", "docker", tag, "version", "--format", "{{.Server.Version}}"}, "."},
		{"the agent", []string{tag}, "--server and a token are required"},
	} {
		out, _ := docker(t, append([]string{"run", "--rm", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"}, tc.args...)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s in the image: %q, want %q", tc.name, out, tc.want)
		}
	}
	if u, _ := docker(t, "inspect", "--format", "{{.Config.User}}", tag); strings.TrimSpace(u) != "10001:10001" {
		t.Errorf("image user %q, want 10001:10001", u)
	}
}
