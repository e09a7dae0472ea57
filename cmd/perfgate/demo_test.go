package main

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
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
