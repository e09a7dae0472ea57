package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// An agent that runs in a container starts engines through the host's
// Docker daemon, which reads a bind mount's source on the host: the
// checkout the agent unpacked at /var/lib/perfgate-agent/sources/… must be
// at that same path on the host, so the state directory (and the models
// directory) must be mounted at the same path on both sides.

// HostMount is a mount of a container, as `docker inspect` shows it.
type HostMount struct {
	Type        string `json:"Type"`
	Source      string `json:"Source"`
	Destination string `json:"Destination"`
}

// InContainer reports whether this process runs in a Docker container.
func InContainer() bool {
	_, err := os.Stat("/.dockerenv")
	return err == nil
}

// SelfContainer is this process's container ID as its daemon knows it: read
// from the container's own files Docker bind-mounts
// (/var/lib/docker/containers/<id>/hostname and the like, in
// /proc/self/mountinfo), else the hostname (which --network host or
// --hostname change).
func SelfContainer() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	h, _ := os.Hostname()
	return selfContainer(b, h)
}

func selfContainer(mountinfo []byte, hostname string) string {
	if m := containerDir.FindSubmatch(mountinfo); m != nil {
		return string(m[1])
	}
	return hostname
}

var containerDir = regexp.MustCompile(`/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)`)

// CheckHostPaths checks that each path, as the agent (in container self)
// sees it, is the same path on the host: a bind mount whose source and
// destination are equal covers it. self is the agent's container (its
// hostname, unless the container was given another); a self the daemon
// does not know is not its container, and passes.
func CheckHostPaths(ctx context.Context, docker, self string, paths ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "inspect", "--format", "{{json .Mounts}}", self).CombinedOutput()
	if err != nil {
		if low := strings.ToLower(string(out)); strings.Contains(low, "no such object") || strings.Contains(low, "no such container") {
			// Not one of this daemon's containers: the daemon runs beside
			// the agent in one (Docker in Docker) and sees its paths.
			return nil
		}
		return fmt.Errorf("inspect the agent's own container %s: %w: %s", self, err, strings.TrimSpace(string(out)))
	}
	var mounts []HostMount
	if err := json.Unmarshal(out, &mounts); err != nil {
		return fmt.Errorf("inspect the agent's own container %s: %w", self, err)
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if !SamePathMounted(mounts, p) {
			return fmt.Errorf("the agent runs in a container and %s is not mounted at the same path on the host: the Docker daemon reads an engine's bind mounts on the host, so mount the state directory (and --models) at the same path on both sides, e.g. -v /var/lib/perfgate-agent:/var/lib/perfgate-agent (docs/security.md)", p)
		}
	}
	return nil
}

// SamePathMounted reports whether path lies under a bind mount whose
// source and destination are the same path (the deepest mount decides).
func SamePathMounted(mounts []HostMount, path string) bool {
	path = filepath.Clean(path)
	best := -1
	same := false
	for _, m := range mounts {
		d := filepath.Clean(m.Destination)
		if path != d && !strings.HasPrefix(path, d+string(filepath.Separator)) && d != "/" {
			continue
		}
		if len(d) > best {
			best = len(d)
			same = m.Type == "bind" && filepath.Clean(m.Source) == d
		}
	}
	return same
}
