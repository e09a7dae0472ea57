package main

import (
	"bytes"
	"strings"
	"testing"
)

// The gate's commands answer with the documented exit codes.
func TestGateCommandExitCodes(t *testing.T) {
	vllm := []string{"--candidate", "../../testdata/gate/vllm-candidate-1.json", "../../testdata/gate/vllm-candidate-2.json",
		"../../testdata/gate/vllm-candidate-3.json", "--baseline", "../../testdata/gate/vllm-baseline.json"}
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"compare usage", []string{"compare", "--candidate", "x.json"}, 3, ""},
		{"compare missing file", []string{"compare", "--candidate", "nope.json", "--baseline", "nope.json"}, 3, ""},
		{"compare unknown tier", append([]string{"compare", "--tier", "weekly"}, vllm...), 3, ""},
		{"compare self", []string{"compare", "--tier", "quick", "--candidate", "../../testdata/gate/vllm-baseline.json", "--baseline", "../../testdata/gate/vllm-baseline.json"}, 0, "PASS"},
		{"compare json", append([]string{"compare", "--json", "--tier", "quick"}, vllm...), 2, `"verdict": "inconclusive"`},
		{"config ok", []string{"config", "validate", "../../testdata/config/perfgate.yml"}, 0, "tier merge: 1000 prompts × 5 runs"},
		{"config invalid", []string{"config", "validate", "../../testdata/config/invalid/bad-forks.yml"}, 1, `triggers.forks: unknown value "maintainers"`},
		{"config usage", []string{"config"}, 3, ""},
		{"simulate usage", []string{"simulate-gate", "--gates", "0"}, 3, ""},
		{"simulate small", []string{"simulate-gate", "--gates", "20"}, 0, "false alarm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainArgs(append([]string{"--log-level", "error"}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("exit %d want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
		})
	}
}
