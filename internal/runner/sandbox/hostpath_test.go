package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSamePathMounted(t *testing.T) {
	t.Parallel()
	mounts := []HostMount{
		{Type: "bind", Source: "/var/lib/perfgate-agent", Destination: "/var/lib/perfgate-agent"},
		{Type: "bind", Source: "/srv/agent-state", Destination: "/state"},
		{Type: "volume", Source: "/var/lib/docker/volumes/v/_data", Destination: "/data"},
		{Type: "bind", Source: "/models", Destination: "/models"},
		{Type: "bind", Source: "/elsewhere", Destination: "/models/llama"},
	}
	for path, want := range map[string]bool{
		"/var/lib/perfgate-agent/sources/abc/tree": true,
		"/var/lib/perfgate-agent":                  true,
		"/var/lib/perfgate-agent-2/sources":        false,
		"/state/sources/abc/tree":                  false,
		"/data/sources":                            false,
		"/models/qwen":                             true,
		"/models/llama/weights":                    false, // the deeper mount decides
		"/tmp/sources":                             false,
	} {
		if got := SamePathMounted(mounts, path); got != want {
			t.Errorf("SamePathMounted(%s) = %v, want %v", path, got, want)
		}
	}
}

// The agent's own container is found from the files Docker mounts into it,
// which --network host (the host's hostname) does not change.
func TestSelfContainer(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("ab", 32)
	info := "1130 1120 254:1 /var/lib/docker/containers/" + id + "/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw\n" +
		"1131 1120 254:1 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw\n"
	if got := selfContainer([]byte(info), "gpu-host-7"); got != id {
		t.Errorf("selfContainer = %q, want the container ID", got)
	}
	if got := selfContainer([]byte("22 1 0:21 / /proc rw - proc proc rw\n"), "gpu-host-7"); got != "gpu-host-7" {
		t.Errorf("without Docker's mounts: %q, want the hostname", got)
	}
}

// CheckHostPaths reads the agent container's mounts from a real daemon
// (a created container stands in for the agent's; nothing runs).
func TestCheckHostPathsDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a Docker daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker daemon: %v: %s", err, out)
		}
		t.Skipf("no Docker daemon: %v", err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "agent", Mode: 0o755, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	imp := exec.CommandContext(ctx, "docker", "import", "-")
	imp.Stdin = &b
	out, err := imp.CombinedOutput()
	if err != nil {
		t.Fatalf("docker import: %v: %s", err, out)
	}
	image := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", image).Run() })
	state := t.TempDir()
	other := t.TempDir()
	for _, tc := range []struct {
		mount, says string
	}{
		{state + ":" + state, ""},
		{other + ":" + state, "not mounted at the same path"},
	} {
		name := "perfgate-hostpath-test-" + filepath.Base(t.TempDir())
		if out, err := exec.CommandContext(ctx, "docker", "create", "--name", name, "-v", tc.mount, image, "/agent").CombinedOutput(); err != nil {
			t.Fatalf("docker create: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
		err := CheckHostPaths(ctx, "docker", name, filepath.Join(state, "sources", "abc", "tree"))
		if tc.says == "" && err != nil {
			t.Errorf("-v %s: %v", tc.mount, err)
		}
		if tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("-v %s: err = %v, want %q", tc.mount, err, tc.says)
		}
	}
	// A container the daemon does not know is not the agent's (Docker in
	// Docker: the daemon shares the agent's paths).
	if err := CheckHostPaths(ctx, "docker", "perfgate-no-such-container", "/anything"); err != nil {
		t.Errorf("unknown container: %v", err)
	}
}
