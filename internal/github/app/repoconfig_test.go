package app

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		glob, name string
		want       bool
	}{
		{"model/**", "model/attention.py", true},
		{"model/**", "model/a/b/c.py", true},
		{"model/**", "model", true},
		{"model/**", "models/x.py", false},
		{"model/**", "src/model/x.py", false},
		{"**/kernels/*.cu", "a/b/kernels/softmax.cu", true},
		{"**/kernels/*.cu", "kernels/softmax.cu", true},
		{"**/kernels/*.cu", "kernels/sub/softmax.cu", false},
		{"*.py", "setup.py", true},
		{"*.py", "model/x.py", false},
		{"inference_engine/**/*.cc", "inference_engine/kv/cache.cc", true},
		{"inference_engine/**/*.cc", "inference_engine/cache.cc", true},
		{"inference_engine/**/*.cc", "inference_engine/cache.h", false},
	}
	for _, tt := range tests {
		if got := MatchPath(tt.glob, tt.name); got != tt.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tt.glob, tt.name, got, tt.want)
		}
	}
}

func TestRepoConfigOf(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(RepoConfig) bool
	}{
		{"empty file is defaults", "", func(c RepoConfig) bool {
			return strings.Join(c.Paths, ",") == "model/**,inference_engine/**" && c.Drafts == DraftsSkip && c.Forks == ForksMaintainer && c.MergeOnApproval && !c.NoCheckWhenUnmatched
		}},
		{"triggers", "paths: [\"kernels/**\"]\ntriggers:\n  drafts: run\n  forks: write\n  merge_label: gate\n  on_approval: false\n  skip_check_when_no_match: true\n",
			func(c RepoConfig) bool {
				return c.Paths[0] == "kernels/**" && c.Drafts == DraftsRun && c.Forks == ForksWrite && c.MergeLabel == "gate" && !c.MergeOnApproval && c.NoCheckWhenUnmatched
			}},
		{"forks never is never", "triggers:\n  forks: never\n", func(c RepoConfig) bool { return c.Forks == ForksNever }},
		{"forks maintainer", "triggers:\n  forks: maintainer\n", func(c RepoConfig) bool { return c.Forks == ForksMaintainer }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse(repoconfig.Path, []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if rc := RepoConfigOf(cfg); !tt.check(rc) {
				t.Errorf("RepoConfigOf = %+v", rc)
			}
		})
	}
}
