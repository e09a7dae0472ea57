package app

import (
	"strings"
	"testing"
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

func TestParseRepoConfig(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		check   func(RepoConfig) bool
		problem string
	}{
		{"empty file is defaults", "", func(c RepoConfig) bool {
			return strings.Join(c.Paths, ",") == "model/**,inference_engine/**" && c.Drafts == DraftsSkip && c.Forks == ForksWait && c.MergeOnApproval
		}, ""},
		{"unknown keys tolerated", "thresholds:\n  ttft_p50: 5%\n", func(c RepoConfig) bool { return len(c.Paths) == 2 }, ""},
		{"triggers", "paths: [\"kernels/**\"]\ntriggers:\n  drafts: run\n  forks: run\n  merge_label: gate\n  merge_on_approval: false\n  skipped_check: false\n",
			func(c RepoConfig) bool {
				return c.Paths[0] == "kernels/**" && c.Drafts == DraftsRun && c.Forks == ForksRun && c.MergeLabel == "gate" && !c.MergeOnApproval && c.NoCheckWhenUnmatched
			}, ""},
		{"yaml syntax", "paths: [\n", nil, "did not find expected"},
		{"empty paths", "paths: []\n", nil, "list at least one glob"},
		{"bad glob", "paths: [\"model/[\"]\n", nil, "syntax error in pattern"},
		{"bad drafts", "triggers:\n  drafts: maybe\n", nil, `triggers.drafts: "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseRepoConfig([]byte(tt.yaml))
			if tt.problem != "" {
				v, ok := asValidation(err)
				if !ok || !strings.Contains(strings.Join(v.ValidationErrors(), "\n"), tt.problem) {
					t.Fatalf("err = %v, want a validation error mentioning %q", err, tt.problem)
				}
				return
			}
			if err != nil || !tt.check(cfg) {
				t.Errorf("cfg = %+v, err = %v", cfg, err)
			}
		})
	}
}

func TestConclusionMapping(t *testing.T) {
	want := map[Verdict]string{
		VerdictPass: "success", VerdictWarning: "neutral", VerdictEscalated: "failure", VerdictInconclusive: "neutral",
		VerdictSkipped: "skipped", VerdictConfigError: "failure", VerdictWaiting: "action_required", VerdictError: "failure",
	}
	for v, c := range want {
		if got := Conclusion(v); got != c {
			t.Errorf("Conclusion(%s) = %s, want %s", v, got, c)
		}
	}
}
