package main

import (
	"strings"
	"testing"
)

// The demo's scenarios refuse what they cannot run before starting
// anything.
func TestDemoScenarioFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--scenario", "nightly"}, `--scenario "nightly": want scheduler or bisect (or none)`},
		{[]string{"demo", "--scenario", "bisect", "--commits", "4", "--planted", "5"}, "--planted one of 1…4"},
		{[]string{"demo", "--scenario", "bisect", "--commits", "0"}, "--commits must be at least 1"},
		{[]string{"demo", "--scenario", "bisect", "--serve", "127.0.0.1:0"}, "--serve goes with the default scenario"},
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
