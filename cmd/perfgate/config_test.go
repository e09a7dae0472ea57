package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func runConfigArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runConfigCmd(context.Background(), &cliEnv{stdout: &out, stderr: &errb, log: zerolog.Nop()}, args)
	return code, out.String(), errb.String()
}

func TestConfigMatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "perfgate.yml")
	if err := os.WriteFile(file, []byte("paths: [\"{model,engine}/**\", \"!model/docs/**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		paths []string
		code  int
		want  []string
	}{
		{[]string{"model/attn.py", "engine/sched.py"}, 0, []string{`model/attn.py: runs the gate (matches "{model,engine}/**")`, "engine/sched.py: runs the gate"}},
		{[]string{"model/attn.py", "model/docs/index.md"}, 1, []string{`model/docs/index.md: does not run the gate (excluded by "!model/docs/**")`}},
		{[]string{"README.md"}, 1, []string{"README.md: does not run the gate (no pattern matches; paths: {model,engine}/**, !model/docs/**)"}},
	}
	for _, tt := range tests {
		code, out, errs := runConfigArgs(t, append([]string{"match", file}, tt.paths...)...)
		if code != tt.code {
			t.Errorf("match %v: exit %d, want %d (stderr %s)", tt.paths, code, tt.code, errs)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("match %v: output lacks %q:\n%s", tt.paths, w, out)
			}
		}
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("paths: [\"!docs/**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runConfigArgs(t, "match", bad, "docs/x.md"); code != 2 || !strings.Contains(errs, "comes before any pattern") {
		t.Errorf("invalid file: exit %d, stderr %s", code, errs)
	}
	if code, _, _ := runConfigArgs(t, "match", file); code != 2 {
		t.Errorf("no paths: exit %d, want 2", code)
	}
}

// The settle budget is priced in the runner's minutes when the file is
// checked: a budget that cannot buy one doubling of the first job says so
// before any PR waits on it.
func TestConfigValidateSettleBudget(t *testing.T) {
	for _, tc := range []struct {
		minutes string
		want    string
	}{
		{"1", "tier quick: settle_gpu_minutes 5 buys 1 doubling(s) of the first job (3 runs ≈ 3 minutes at 1 min/run)"},
		{"1", "tier merge: settle_gpu_minutes 150 buys 3 doubling(s) of the first job (16 runs: 8 base/head pairs ≈ 16 minutes at 1 min/run)"},
		{"3", "warning: tier quick: settle_gpu_minutes 5 cannot buy one doubling of the first job (3 runs ≈ 9 minutes at 3 min/run)"},
	} {
		var stdout, stderr bytes.Buffer
		code := mainArgs([]string{"--log-level", "error", "config", "validate", "--run-minutes", tc.minutes, "../../testdata/config/perfgate.yml"}, &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("--run-minutes %s: exit %d, want a line %q:\n%s%s", tc.minutes, code, tc.want, stdout.String(), stderr.String())
		}
	}
}
