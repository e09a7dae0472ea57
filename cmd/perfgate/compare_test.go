package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
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
		{"compare self", append([]string{"compare", "--tier", "quick", "--baseline", "../../testdata/gate/vllm-candidate-1.json",
			"../../testdata/gate/vllm-candidate-2.json", "../../testdata/gate/vllm-candidate-3.json"}, vllm[:4]...), 0, "PASS"},
		{"compare json", append([]string{"compare", "--json", "--tier", "quick"}, vllm...), 2, `"verdict": "inconclusive"`},
		// No failed request on either side: an all-zero error_rate, whose
		// p-value was NaN and made the JSON encoder fail (exit 3).
		{"compare json zero error rate", append([]string{"compare", "--json", "--tier", "merge"}, vllm...), 2, `"metric": "error_rate"`},
		{"compare history", append([]string{"compare", "--tier", "quick", "--history", "../../testdata/gate/vllm-baseline.json"}, vllm...), 2, "noise history of 1 session"},
		{"compare paired", append([]string{"compare", "--tier", "quick", "--paired"}, vllm...), 2, "3 interleaved pairs"},
		{"compare paired unequal", []string{"compare", "--paired", "--candidate", "../../testdata/gate/vllm-candidate-1.json", "--baseline", "../../testdata/gate/vllm-baseline.json"}, 3, ""},
		{"compare looks", append([]string{"compare", "--tier", "quick", "--looks", "../../testdata/gate/looks-1.json"}, vllm...), 2, "look 2 of 4: α 0.263% of the plan's 1% (0.763% spent;"},
		{"config ok", []string{"config", "validate", "../../testdata/config/perfgate.yml"}, 0, "tier merge: 1000 prompts × 5 runs"},
		{"config invalid", []string{"config", "validate", "../../testdata/config/invalid/bad-forks.yml"}, 1, `triggers.forks: unknown value "maintainers"`},
		{"config usage", []string{"config"}, 3, ""},
		{"simulate usage", []string{"simulate-gate", "--gates", "0"}, 3, ""},
		{"simulate small", []string{"simulate-gate", "--gates", "20"}, 0, "FA 5 retests"},
		{"simulate stored", []string{"simulate-gate", "--gates", "10", "--design", "stored", "--noise", "n2", "--history", "0"}, 0, "stored baseline: 5 candidate vs 5 baseline runs"},
		{"simulate bad design", []string{"simulate-gate", "--design", "mixed"}, 3, ""},
		{"simulate bad noise", []string{"simulate-gate", "--noise", "n9"}, 3, ""},
		{"simulate stress", []string{"simulate-gate", "--stress", "model,one missing", "--aa", "20", "--gates", "10", "--profile", "../../testdata/gate/profile/example.json"}, 0, "profile: example (not a measurement)"},
		{"simulate unknown stress", []string{"simulate-gate", "--stress", "gremlins", "--aa", "5"}, 3, ""},
		{"simulate stress plan", []string{"simulate-gate", "--stress", "model", "--plan", "obrien-fleming", "--aa", "20", "--gates", "10"}, 0, "plan of 4 looks (obrien-fleming)"},
		{"simulate bad plan", []string{"simulate-gate", "--stress", "model", "--plan", "haybittle"}, 3, ""},
		{"simulate bad profile", []string{"simulate-gate", "--profile", "../../testdata/gate/profile/bad-cv.json", "--aa", "5"}, 3, ""},
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

// The README's quick start compares `bench --sim` with `bench --sim
// --sim-slowdown 1.2`: the slowdown is the change being measured, not a
// different engine, so the two are comparable (it used to be written into
// engine_image, and every such comparison was an environment mismatch).
func TestSimSlowdownIsComparable(t *testing.T) {
	dir := t.TempDir()
	var runs []*result.Result
	for _, slowdown := range []string{"1", "1.2"} {
		file := filepath.Join(dir, "r"+slowdown+".json")
		code, _, stderr := runBenchArgs(t, "--sim", "--sim-slowdown", slowdown, "--num-prompts", "8", "--input-len", "8", "--output-len", "4", "--output", file)
		if code != 0 {
			t.Fatalf("bench --sim-slowdown %s: exit %d: %s", slowdown, code, stderr)
		}
		r, err := result.LoadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	tier, _ := config.Default().Tier("quick")
	rep, err := gate.Compare(runs[:1], runs[1:], tier, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) != 0 {
		t.Errorf("sim runs with and without a slowdown differ in %+v", rep.Mismatches)
	}
}

// --history takes a directory: each .json file in it is one earlier
// session, as if named by its own --history; an empty one is a usage error.
func TestCompareHistoryDir(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/gate/vllm-baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.json", "b.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--log-level", "error", "compare", "--tier", "quick", "--candidate", "../../testdata/gate/vllm-candidate-1.json",
		"../../testdata/gate/vllm-candidate-2.json", "../../testdata/gate/vllm-candidate-3.json", "--baseline", "../../testdata/gate/vllm-baseline.json"}
	for _, tc := range []struct {
		name string
		dir  string
		code int
		out  string
	}{
		{"two sessions", dir, 2, "noise history of 2 sessions"},
		{"empty", t.TempDir(), 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainArgs(append(args, "--history", tc.dir), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("exit %d want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
		})
	}
}
