package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const baselineFixture = "../../testdata/baseline/v0.26.0/llama-8b-tp8.json"

// writeRuns writes the fixture's runs, changed by f, as a JSON array of
// results (what several `perfgate bench --output` files amount to).
func writeRuns(t *testing.T, dir, name string, f func(r *result.Result)) string {
	t.Helper()
	data, err := os.ReadFile(baselineFixture)
	if err != nil {
		t.Fatal(err)
	}
	s, err := baseline.Import(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Runs {
		f(r)
	}
	out, err := json.Marshal(s.Runs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The baseline commands answer with the documented exit codes, in the
// order a user meets them: import, show, list, export, a refused lowering,
// an untraceable set, an allowed lowering.
func TestBaselineCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db.sqlite")
	// The server creates its store; the commands only read and write it.
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	same := writeRuns(t, dir, "same.json", func(*result.Result) {})
	worse := writeRuns(t, dir, "worse.json", func(r *result.Result) { r.Metrics["median_tpot_ms"] *= 1.2 })
	noDriver := writeRuns(t, dir, "nodriver.json", func(r *result.Result) { r.Perfgate.Environment.Driver = "" })
	exported := filepath.Join(dir, "out.json")
	repo := []string{"--db", db, "--repo", "acme/inference"}
	key := append(repo, "--key", "llama-8b-tp8")
	promote := func(extra ...string) []string {
		return append(append([]string{"baseline", "promote", "--by", "octocat", "--commit", "9e8d7c6b5a4f"}, key...), extra...)
	}
	cases := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout string
	}{
		{"no subcommand", []string{"baseline"}, 3, "", "usage: perfgate baseline", ""},
		{"unknown subcommand", []string{"baseline", "delete"}, 3, "", "unknown subcommand", ""},
		{"promote without files", promote("--version", "v1"), 3, "", "give the result files", ""},
		{"promote without version", promote(same), 3, "", "--version is required", ""},
		{"allow-lower without reason", promote("--version", "v1", "--allow-lower", same), 3, "", "--allow-lower needs --reason", ""},
		{"import a result file", []string{"baseline", "import", "--db", db, same}, 3, "", "not an export file", ""},
		{"show before any", append([]string{"baseline", "show"}, key...), 3, "", "no baseline for acme/inference llama-8b-tp8", ""},
		{"import", []string{"baseline", "import", "--db", db, "--by", "octocat", baselineFixture}, 0, "as baseline #1 (v0.26.0)", "", ""},
		{"same version again", promote("--version", "v0.26.0", same), 3, "", "already baseline #1", ""},
		{"show", append([]string{"baseline", "show"}, key...), 0,
			"perfgate bench --target http://127.0.0.1:8000 --endpoint /v1/completions --model meta-llama/Llama-3.1-8B-Instruct --dataset random --input-len 1024 --output-len 128 --num-prompts 1000", "", ""},
		{"show by version", append([]string{"baseline", "show", "--version", "v0.26.0"}, key...), 0, "tpot_p99", "", ""},
		{"show missing number", append([]string{"baseline", "show", "--version", "7"}, key...), 3, "", "no baseline 7", ""},
		{"list", append([]string{"baseline", "list"}, repo...), 0, "llama-8b-tp8  1  v0.26.0", "", ""},
		{"export", append([]string{"baseline", "export", "-o", exported}, key...), 0, "", "", ""},
		{"refused lowering", promote("--version", "v0.27.0", worse), 1, "compared with the current baseline", `refused by the rule "a baseline only moves up"`, ""},
		{"untraceable", promote("--version", "v0.27.0", noDriver), 1, "", `refused by the rule "every baseline is traceable": no driver version`, ""},
		{"allowed lowering", promote("--version", "v0.27.0", "--allow-lower", "--reason", "fp8 KV cache: accepted in #812", worse), 0,
			"lowered with --allow-lower: fp8 KV cache", "", ""},
		{"list after", append([]string{"baseline", "list"}, repo...), 0, "llama-8b-tp8  2  v0.27.0", "", ""},
		{"show lowered", append([]string{"baseline", "show"}, key...), 0, "lowered", "", ""},
		{"export to stdout", append([]string{"baseline", "export", "--version", "1"}, key...), 0, `"version": "v0.26.0"`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainArgs(append([]string{"--log-level", "error"}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
		})
	}

	// The exported file is the layout compare and import read.
	f, err := os.Open(exported)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := baseline.Import(f)
	if err != nil || s.Label != "v0.26.0" || s.PromotedBy != "octocat" || len(s.Runs) != 5 {
		t.Errorf("exported file = %+v, %v", s.Baseline, err)
	}
	var stdout, stderr bytes.Buffer
	// The quick tier: a stored comparison at merge's 5% cannot rule out a
	// 5% change under the 2% session noise it assumes (merge interleaves).
	if code := mainArgs([]string{"--log-level", "error", "compare", "--tier", "quick", "--candidate", same, "--baseline", exported}, &stdout, &stderr); code != 0 {
		t.Errorf("compare against the export: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}
