package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/server"
)

// TestMain lets this test binary stand in for perfgate where perfgate
// starts itself: serve runs os.Executable() with "door", which here is
// this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "door" {
		os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = mainArgs(args, &out, &errb)
	return code, out.String(), errb.String()
}

// -h on every command and subcommand exits 0, prints on stdout, and shows
// the flags.
func TestEveryHelpExitsZero(t *testing.T) {
	cases := [][]string{{"-h"}, {"--help"}, {"help"}, {"help", "bench"}}
	for _, name := range commandNames() {
		cases = append(cases, []string{name, "-h"}, []string{name, "--help"})
	}
	for _, sub := range []string{"promote", "import", "show", "list", "export"} {
		cases = append(cases, []string{"baseline", sub, "-h"})
	}
	cases = append(cases, []string{"config", "validate", "-h"}, []string{"config", "validate", "--help"})
	cases = append(cases, []string{"runners", "drain", "-h"}, []string{"runners", "undrain", "--help"})
	for _, args := range cases {
		code, stdout, stderr := run(t, args...)
		if code != 0 || !strings.Contains(stdout, "usage: perfgate") || stderr != "" {
			t.Errorf("perfgate %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, firstLine(stdout), stderr)
		}
	}
	// Spot checks that the flags are all there.
	for args, want := range map[string][]string{
		"bench -h":            {"--endpoint", "--sim", "--num-prompts", "--goodput", `(default "/v1/`},
		"baseline promote -h": {"--by", "required", "--allow-lower", "--db"},
		"demo -h":             {"--slowdown", "--dir"},
		"agent -h":            {"--server", "--registration-token", "--labels"},
	} {
		_, stdout, _ := run(t, strings.Fields(args)...)
		for _, w := range want {
			if !strings.Contains(stdout, w) {
				t.Errorf("perfgate %s lacks %q:\n%s", args, w, stdout)
			}
		}
	}
	// serve -h names every setting's variable and server.yml key.
	_, stdout, _ := run(t, "serve", "-h")
	for _, s := range server.Settings {
		if !strings.Contains(stdout, s.Env+" / "+s.Key) {
			t.Errorf("serve -h lacks %s / %s", s.Env, s.Key)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"--log-level", "debug", "version"}} {
		code, stdout, _ := run(t, args...)
		if code != 0 || !regexp.MustCompile(`^perfgate \S+ .*go1\.\d+.* NVML telemetry`).MatchString(stdout) {
			t.Errorf("perfgate %v: %d %q", args, code, stdout)
		}
	}
	old := version
	version = "v9.9.9"
	defer func() { version = old }()
	if _, stdout, _ := run(t, "version"); !strings.HasPrefix(stdout, "perfgate v9.9.9 ") {
		t.Errorf("-ldflags -X main.version is ignored: %q", stdout)
	}
}

func TestMistakesGetOneLineAndASuggestion(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"srve"}, `unknown command "srve"; did you mean "serve"?`},
		{[]string{"bench", "--endpont", "/v1/completions"}, "unknown flag --endpont; did you mean --endpoint?"},
		{[]string{"bench", "--num-prompts", "many"}, `invalid value "many" for flag --num-prompts`},
		{[]string{"baseline", "promot"}, `did you mean "promote"?`},
		{[]string{"config", "valdate"}, `did you mean "validate"?`},
		{[]string{"--log-levl", "debug", "demo"}, "did you mean --log-level?"},
		{[]string{"serve", "--data-dri", "x"}, "did you mean --data-dir?"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != 3 || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("perfgate %v: exit %d, stderr %q, want 3 and %q", tt.args, code, stderr, tt.want)
		}
		if n := strings.Count(stderr, "\n"); n > 4 {
			t.Errorf("perfgate %v: %d lines of stderr, want a short message:\n%s", tt.args, n, stderr)
		}
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	file := filepath.Join("..", "..", "testdata", "config", "perfgate.yml")
	for _, args := range [][]string{
		{"--log-level", "error", "config", "validate", file},
		{"config", "--log-level", "error", "validate", file},
		{"config", "validate", file, "--log-level=error"},
		{"config", "validate", "--log-level", "error", file},
	} {
		if code, stdout, stderr := run(t, args...); code != 0 || !strings.Contains(stdout, ": ok") {
			t.Errorf("perfgate %v: %d %q %q", args, code, stdout, stderr)
		}
	}
	if code, _, stderr := run(t, "config", "validate", "--log-level", "loud", file); code != 3 || !strings.Contains(stderr, "--log-level") {
		t.Errorf("bad level: %d %q", code, stderr)
	}
}

// A bare `perfgate serve` refuses without creating perfgate.db, and names
// the variable to set.
func TestServeRefusesBeforeTouchingAnything(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, s := range server.Settings {
		t.Setenv(s.Env, "")
		os.Unsetenv(s.Env)
	}
	code, _, stderr := run(t, "serve")
	if code != 3 || !strings.Contains(stderr, "PERFGATE_PUBLIC_URL") {
		t.Errorf("bare serve: %d %q", code, stderr)
	}
	code, _, stderr = run(t, "serve", "--data-dir", filepath.Join(dir, "state"), "--addr", "bad", "--public-url", "not a url")
	if code != 3 || !strings.Contains(stderr, "PERFGATE_ADDR") || !strings.Contains(stderr, "PERFGATE_PUBLIC_URL") {
		t.Errorf("two problems in one round: %d %q", code, stderr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a refused serve left %v behind", entries)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
