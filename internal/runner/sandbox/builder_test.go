package sandbox

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The CLI that drives the builder talks to it alone, with no registry
// credentials and the classic builder, whatever the agent's environment
// said of those.
func TestBuilderEnv(t *testing.T) {
	t.Parallel()
	b := &Builder{Host: "unix:///run/b.sock", configDir: "/tmp/empty"}
	got := b.Env([]string{"PATH=/bin", "DOCKER_HOST=tcp://10.0.0.1:2375", "DOCKER_CONFIG=/root/.docker",
		"DOCKER_CONTEXT=prod", "DOCKER_CERT_PATH=/c", "DOCKER_TLS_VERIFY=1", "DOCKER_BUILDKIT=1", "HOME=/root"})
	want := []string{"PATH=/bin", "HOME=/root", "DOCKER_HOST=unix:///run/b.sock", "DOCKER_CONFIG=/tmp/empty", "DOCKER_BUILDKIT=0"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
}

// A runner that cannot start the builder says what to install.
func TestStartBuilderWithoutDockerd(t *testing.T) {
	t.Parallel()
	_, err := StartBuilder(context.Background(), BuilderConfig{Dir: t.TempDir(), Dockerd: "perfgate-no-such-dockerd", Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "install Docker's daemon") {
		t.Fatalf("err = %v, want one naming the daemon to install", err)
	}
}
