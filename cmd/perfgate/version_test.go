package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tt := range []struct {
		name      string
		stamp     string
		info      *debug.BuildInfo
		v, commit string
		dirty     bool
		devel     bool // v starts "(devel"
	}{
		{"stamped", "v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v1.4.0", "", false, false},
		{"go install @tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.3.2"}}, "v1.3.2", "", false, false},
		{"checkout with VCS", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("01637ba0d1b5c0ffee", "true")}, "(devel)", "01637ba0d1b5", true, true},
		{"pseudo-version only", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204152133-01637ba0d1b5+dirty"}},
			"v0.0.0-20261204152133-01637ba0d1b5+dirty", "01637ba0d1b5", true, false},
		{"no VCS information", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", false, true},
		{"no build info", "", nil, "", "", false, true},
	} {
		v, commit, dirty := versionOf(tt.stamp, tt.info)
		if tt.devel {
			if !strings.HasPrefix(v, "(devel") || (commit == "" && !strings.Contains(v, "without VCS information")) {
				t.Errorf("%s: version %q", tt.name, v)
			}
		} else if v != tt.v {
			t.Errorf("%s: version %q, want %q", tt.name, v, tt.v)
		}
		if commit != tt.commit || dirty != tt.dirty {
			t.Errorf("%s: commit %q dirty %v, want %q %v", tt.name, commit, dirty, tt.commit, tt.dirty)
		}
	}
}
