package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// An air-gapped runner's images have no repository digest: an engine may
// name a local image by its ID, or by a tag pinned to that ID, and the pin
// is checked against the daemon before each run — a tag that moved is
// refused. Needs a Docker daemon (no registry: the images are imported).
func TestResolveLocalImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a Docker daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker daemon: %v: %s", err, out)
		}
		t.Skipf("no Docker daemon: %v: %s", err, out)
	}
	const tag = "perfgate-resolve-test:pinned"
	imp := func(content string) string {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: "engine", Mode: 0o644, Size: int64(len(content))})
		tw.Write([]byte(content))
		tw.Close()
		cmd := exec.CommandContext(ctx, "docker", "import", "-", tag)
		cmd.Stdin = &b
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker import: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	a := imp("engine A " + t.Name())
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag, a).Run() })
	for _, tc := range []struct {
		image, want, says string
	}{
		{a, a, ""},
		{tag + "@" + a, a, ""},
		{"sha256:" + strings.Repeat("0", 64), "", "not on this runner"},
		{"perfgate-resolve-test-absent@" + a, "perfgate-resolve-test-absent@" + a, ""}, // not here: docker run pulls by digest
	} {
		got, err := ResolveImage(ctx, "docker", tc.image)
		if tc.says != "" {
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %q, %v; want an error saying %q", tc.image, got, err, tc.says)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.image, got, err, tc.want)
		}
	}
	// The tag moves to another image: the pin to a no longer holds.
	b := imp("engine B " + t.Name())
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", b).Run() })
	if got, err := ResolveImage(ctx, "docker", tag+"@"+a); err == nil || !strings.Contains(err.Error(), "the tag moved") {
		t.Errorf("after the tag moved: %q, %v; want a refusal", got, err)
	}
}
