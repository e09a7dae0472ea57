package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/demo"
)

// The demo's scenarios refuse what they cannot run before starting
// anything.
func TestDemoScenarioFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--scenario", "nightly"}, `--scenario "nightly": want scheduler, bisect, capacity or soak (or none)`},
		{[]string{"demo", "--scenario", "bisect", "--commits", "4", "--planted", "5"}, "--planted one of 1…4"},
		{[]string{"demo", "--scenario", "bisect", "--commits", "0"}, "--commits must be at least 1"},
		{[]string{"demo", "--scenario", "bisect", "--serve", "127.0.0.1:0"}, "--serve goes with the default scenario"},
		{[]string{"demo", "--engine", "ollama", "--scenario", "capacity"}, "--engine ollama runs the default scenario (a slower model, a docs-only PR) and the bisect; --scenario capacity is on the sim"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 3 || !strings.Contains(stderr, tc.want) {
			t.Errorf("perfgate %s: exit %d, stderr %q; want 3 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if code, stdout, _ := run(t, "demo", "-h"); code != 0 || !strings.Contains(stdout, "--scenario") || !strings.Contains(stdout, "--planted") {
		t.Errorf("demo -h: exit %d\n%s", code, stdout)
	}
}

// On a terminal the demo's story is not drowned by the server's and
// agent's info lines; a chosen level, or a pipe (CI logs), keeps them.
func TestDemoLogQuietOnATerminal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		level            zerolog.Level
		chosen, terminal bool
		want             zerolog.Level
		quieter          bool
	}{
		{"terminal, default level", zerolog.InfoLevel, false, true, zerolog.WarnLevel, true},
		{"terminal, level chosen", zerolog.InfoLevel, true, true, zerolog.InfoLevel, false},
		{"terminal, debug chosen", zerolog.DebugLevel, true, true, zerolog.DebugLevel, false},
		{"pipe", zerolog.InfoLevel, false, false, zerolog.InfoLevel, false},
		{"terminal, already error", zerolog.ErrorLevel, false, true, zerolog.ErrorLevel, false},
	} {
		log, quieter := demoLog(zerolog.Nop().Level(tt.level), tt.chosen, tt.terminal)
		if log.GetLevel() != tt.want || quieter != tt.quieter {
			t.Errorf("%s: level %v quieter %v, want %v %v", tt.name, log.GetLevel(), quieter, tt.want, tt.quieter)
		}
	}
}

// The default demo's exit status says how its story ended: the gate's
// undecided verdict has its own code and its explanation on stderr.
func TestDemoExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{&demo.VerdictError{Code: demo.ExitUndecided, Explanation: "PR #17 (slows the engine): the gate could not decide\n"}, 2, "exit 2):\nPR #17 (slows the engine): the gate could not decide\n"},
		{fmt.Errorf("step 2: %w", &demo.VerdictError{Code: demo.ExitOtherVerdict, Explanation: "PR #17 passed\n"}), 4, "PR #17 passed"},
		{errors.New("timed out after 3m0s waiting for PR #17's quick check"), 1, "perfgate demo: timed out after 3m0s waiting for PR #17's quick check\n"},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		if code := demoExit(&stderr, tt.err); code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("demoExit(%v) = %d, stderr %q; want %d, %q", tt.err, code, stderr.String(), tt.code, tt.stderr)
		}
	}
}
