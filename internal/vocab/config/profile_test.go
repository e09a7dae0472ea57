package config

import (
	"strings"
	"testing"
)

func TestProfileSection(t *testing.T) {
	t.Parallel()
	c, err := Parse(DefaultPath, []byte("profile:\n  requests: 32\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile.Requests != 32 || !c.ProfilesOnRegression("merge") || c.ProfilesOnRegression("quick") {
		t.Errorf("profile %+v: want 32 requests, merge profiled on regression by default, quick not", c.Profile)
	}
	cases := []struct{ yaml, want string }{
		{"profile:\n  on_regression: [quik]\n", `no tier "quik"`},
		{"profile:\n  requests: 0\n", "profile.requests"},
		{"profile:\n  timeout: 1s\n", "profile.timeout"},
		{"profile:\n  max_bytes: 10\n", "profile.max_bytes"},
		{"profile:\n  command: [nsys, profile, -o, \"{{.Outt}}/x\"]\n", "unknown placeholder {{.Outt}} (did you mean {{.Out}}?)"},
		{"profile:\n  command: [nsys, profile, -o, /tmp/x]\n", "never names {{.Out}}"},
	}
	for _, tc := range cases {
		_, err := Parse(DefaultPath, []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse(DefaultPath, []byte("profile:\n  on_regression: [quick, merge]\n  command: [nsys, profile, --attach-pid, \"{{.PID}}\", -o, \"{{.Out}}/trace\"]\n")); err != nil {
		t.Errorf("a valid profile section: %v", err)
	}
}
