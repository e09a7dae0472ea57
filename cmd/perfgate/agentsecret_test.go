package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// A token file readable by every user is warned about once, however many
// times the agent reads it (a --token-file is read once to tell which
// token it holds, then again as that token).
func TestAgentWarnsOncePerTokenFile(t *testing.T) {
	for _, env := range []string{"PERFGATE_AGENT_TOKEN", "PERFGATE_AGENT_REGISTRATION_TOKEN", "PERFGATE_REGISTRATION_TOKEN", "CREDENTIALS_DIRECTORY"} {
		t.Setenv(env, "")
	}
	const warning = "readable by every user"
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		flag    string
		want    int // warnings
	}{
		{"agent token in --token-file", agentapi.AgentTokenPrefix + "0123456789abcdef", 0o644, "--token-file", 1},
		{"registration token in --token-file", "registration-0123456789abcdef", 0o644, "--token-file", 1},
		{"--registration-token-file", "registration-0123456789abcdef", 0o644, "--registration-token-file", 1},
		{"owner-only agent token", agentapi.AgentTokenPrefix + "0123456789abcdef", 0o600, "--token-file", 0},
		{"owner-only registration token", "registration-0123456789abcdef", 0o600, "--token-file", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(f, []byte(tt.content+"\n"), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f, tt.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			// No --server: the agent stops right after reading its tokens.
			code, _, stderr := run(t, "agent", tt.flag, f)
			if code != 3 || !strings.Contains(stderr, "--server and a token are required") {
				t.Fatalf("perfgate agent %s: exit %d, stderr %q", tt.flag, code, stderr)
			}
			if n := strings.Count(stderr, warning); n != tt.want {
				t.Errorf("%d warnings %q, want %d:\n%s", n, warning, tt.want, stderr)
			}
		})
	}
}
