package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// A profiling pass's trace directory reaches the engine: mounted writable
// at /perfgate-profile and named by VLLM_TORCH_PROFILER_DIR in a
// container (the checkout and models stay read-only), the host path for a
// command engine.
func TestProfileDir(t *testing.T) {
	s := Spec{
		Image: testDigest, Model: "m", GPUUUID: "GPU-5a1b2c3d-0000-1111-2222-333344445555", JobID: "7/profile", Agent: "a",
		Workdir: "/var/cache/tree", ModelsDir: "/srv/models", ProfileDir: "/var/lib/perfgate/profile-1", RelayImage: "sha256:relay",
		Sandbox: sandbox.Policy{Memory: "64g"},
	}.withDefaults()
	argv, err := s.dockerArgv()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(argv, " ")
	for _, want := range []string{
		"--mount type=bind,source=/var/lib/perfgate/profile-1,target=/perfgate-profile --",
		"--mount type=bind,source=/var/cache/tree,target=/workspace,readonly",
		"--mount type=bind,source=/srv/models,target=/models,readonly",
		"--env VLLM_TORCH_PROFILER_DIR=/perfgate-profile",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("docker run line lacks %q:\n%s", want, line)
		}
	}
	s.ProfileDir = ""
	if argv, _ := s.dockerArgv(); strings.Contains(strings.Join(argv, " "), "perfgate-profile") {
		t.Errorf("a measured run's container gets the profile mount: %s", strings.Join(argv, " "))
	}
	cmd := Spec{Command: []string{"vllm", "serve"}, Model: "m", ProfileDir: "/tmp/p"}
	if env := cmd.commandEnv(); !slices.Contains(env, "VLLM_TORCH_PROFILER_DIR=/tmp/p") {
		t.Errorf("command engine env lacks the profile dir: %v", env)
	}
}
