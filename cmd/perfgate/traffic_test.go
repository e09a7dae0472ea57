package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// perfgate bench --sim with the traffic-shape flags: sessions reuse their
// conversation's prefix in the sim's cache, the model mix reaches the sim
// (which serves every named model), and the result and the summary say
// what was drawn.
func TestBenchTrafficFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := run(t, "bench", "--sim", "--num-prompts", "20", "--sessions", "4", "--turns", "5", "--user-len", "16",
		"--input-len", "32", "--output-len", "4", "--model-mix", "perfgate-sim:1,sql-lora:1", "--seed", "3", "--disable-tqdm", "--output", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r result.Result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	tr := r.Perfgate.Traffic
	if r.Completed != 20 || tr == nil || tr.Counts["sessions"] != 4 || tr.Counts["model:perfgate-sim"]+tr.Counts["model:sql-lora"] != 20 {
		t.Fatalf("completed %d, traffic %+v", r.Completed, tr)
	}
	if h := r.Perfgate.ServerMetrics.PrefixCacheHitRate; h == nil || *h < 0.3 {
		t.Errorf("prefix-cache hit rate %v; sessions should reuse their prefixes", h)
	}
	if !strings.Contains(stdout, "Chat sessions:                           4 × 5 turns, +16 user tokens a turn") || !strings.Contains(stdout, "Model sql-lora:") {
		t.Errorf("summary lacks the traffic shape:\n%s", stdout)
	}
	for _, tc := range []struct{ args, want string }{
		{"--prompt-mix short:1", `--prompt-mix: "short:1": want NAME:INPUT_LEN[:OUTPUT_LEN]:WEIGHT`},
		{"--model-mix a", `--model-mix: "a": want NAME:WEIGHT`},
		{"--sessions 3", "--sessions needs --turns"},
		{"--turns 3 --user-len 0", "sessions.user_len: 0 tokens"},
	} {
		code, _, stderr := run(t, append([]string{"bench", "--sim"}, strings.Fields(tc.args)...)...)
		if code != 3 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d %q, want 3 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
