package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// server.yml's problems come in one report, top to bottom: every unknown
// key and every value of the wrong type, not one kind per start.
func TestLoadConfigReportsEveryProblemAtOnce(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(path, []byte("adr: \":9000\"\nlease: lots\nhttp:\n  max_body_bytes: 1\nlong_poll: often\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	want := []string{
		`line 1: unknown key "adr" (did you mean "addr"?)`,
		"line 2: cannot unmarshal !!str `lots`",
		`line 4: unknown key "http.max_body_bytes"`,
		"line 5: cannot unmarshal !!str `often`",
	}
	var fileProblems []string
	for _, p := range ce.Problems {
		if strings.HasPrefix(p, path) {
			fileProblems = append(fileProblems, p)
		}
	}
	if len(fileProblems) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d about the file", strings.Join(ce.Problems, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(fileProblems[i], w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, fileProblems[i], w)
		}
	}
}
