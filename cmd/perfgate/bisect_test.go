package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

func TestSplitCommand(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{"perfgate sim --port {{.Port}}", []string{"perfgate", "sim", "--port", "{{.Port}}"}, false},
		{"  a   b\tc ", []string{"a", "b", "c"}, false},
		{`sh -c 'exec sim $(cat f) | x'`, []string{"sh", "-c", "exec sim $(cat f) | x"}, false},
		{`a "b c" "d \"e\""`, []string{"a", "b c", `d "e"`}, false},
		{`a\ b ''`, []string{"a b", ""}, false},
		{`a 'b`, nil, true},
		{`a \`, nil, true},
		{"   ", nil, true},
	}
	for _, tc := range cases {
		got, err := splitCommand(tc.in)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestBisectHelp(t *testing.T) {
	for _, args := range [][]string{{"bisect", "run", "-h"}, {"bisect", "measure", "--help"}, {"bisect", "-h"}} {
		code, stdout, stderr := run(t, args...)
		if code != 0 || !strings.Contains(stdout, "usage: perfgate bisect") || stderr != "" {
			t.Errorf("perfgate %v: exit %d, stdout %q, stderr %q", args, code, firstLine(stdout), stderr)
		}
	}
	if code, _, stderr := run(t, "bisect", "rn"); code != 3 || !strings.Contains(stderr, `did you mean "run"?`) {
		t.Errorf("bisect rn: %d %q", code, stderr)
	}
}

func TestBisectRunUsageAborts(t *testing.T) {
	// A usage error must abort git bisect (exit > 127), never mark the
	// commit bad (1–127) or skip it (125).
	for _, args := range [][]string{
		{},
		{"--good", "/no/such/file.json"},
		{"--good", "x.json", "--metric", "tpot_p101"},
		{"--good", "x.json", "--min-change", "200%"},
		{"--bogus"},
		{"--good", "x.json", "--direction", "up"},
	} {
		var out, errw bytes.Buffer
		code := runBisectRun(context.Background(), &cliEnv{stdout: &out, stderr: &errw, log: zerolog.Nop()}, args)
		if code != exitAbort {
			t.Errorf("bisect run %q exited %d, want %d (stderr %s)", args, code, exitAbort, errw.String())
		}
	}
}

// TestBisectWorkdir: {{.Workdir}} and {{.SHA}} in the engine command name
// the checkout being measured — the current one for bisect measure, the
// good commit's temporary worktree for the good side of bisect run (it
// expanded to "" in both, so the demo's own config failed there). The
// engine here records what it was given and exits, which fails the start.
func TestBisectWorkdir(t *testing.T) {
	repo := ghtest.NewGitRepo(t)
	good := repo.Commit("first", map[string]string{"README": "good\n"})
	head := repo.Commit("second", map[string]string{"README": "head\n"})
	seen := filepath.Join(t.TempDir(), "seen")
	command := fmt.Sprintf(`sh -c 'echo "$0 $1 $(cat README)" >> %s; exit 1' {{.Workdir}} {{.SHA}}`, seen)
	t.Chdir(repo.Dir)
	read := func() string {
		data, _ := os.ReadFile(seen)
		os.Remove(seen)
		return strings.TrimSpace(string(data))
	}
	env := func() (*cliEnv, *bytes.Buffer) {
		var out bytes.Buffer
		return &cliEnv{stdout: &out, stderr: &out, log: zerolog.Nop()}, &out
	}

	e, out := env()
	if code := runBisectMeasure(context.Background(), e, []string{"--command", command, "--output", filepath.Join(t.TempDir(), "x.json"), "--start-timeout", "20s"}); code != 1 {
		t.Fatalf("bisect measure with an engine that exits: %d, want 1\n%s", code, out)
	}
	dir, _ := filepath.EvalSymlinks(repo.Dir)
	if got, want := read(), dir+" "+head+" head"; got != want {
		t.Errorf("bisect measure's engine got %q, want %q (workdir, sha, the checkout's README)", got, want)
	}

	e, out = env()
	if code := runBisectRun(context.Background(), e, []string{"--command", command, "--good", good, "--metric", "tpot_median", "--start-timeout", "20s"}); code != exitAbort {
		t.Fatalf("bisect run with a good commit whose engine exits: %d, want %d (abort)\n%s", code, exitAbort, out)
	}
	got := strings.Fields(read())
	if len(got) != 3 || !strings.HasSuffix(got[0], "/tree") || got[1] != good || got[2] != "good" {
		t.Errorf("bisect run's good engine got %q, want its own worktree, its SHA %s and its README", got, good)
	}
	if wt := repo.Git("worktree", "list"); strings.Count(wt, "\n") > 1 {
		t.Errorf("the good commit's worktree was left behind:\n%s", wt)
	}
}

// TestBisectRunUnderGitBisect runs a real `git bisect run perfgate bisect
// run …` over a repository whose commits change the simulated engine's
// knobs (inference_engine/sim.yaml, read by perfgate sim --config): one
// commit makes every step 60% slower, one has a key the sim refuses. git
// bisect must name the slow commit and skip the broken one.
func TestBisectRunUnderGitBisect(t *testing.T) {
	if testing.Short() {
		t.Skip("builds perfgate and runs git bisect: not in -short")
	}
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "perfgate")
	build := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".") //nolint:staticcheck // the toolchain that runs this test, on this machine
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built perfgate in %s", time.Since(start).Round(time.Millisecond))

	// The engine's knobs live in the repository, as a PR changes them; the
	// config (read from each checkout) starts the sim with them.
	cfg := fmt.Sprintf(`server:
  command: ["%s", "sim", "--config", "{{.Workdir}}/inference_engine/sim.yaml", "--port", "{{.Port}}"]
  model: perfgate-sim
  start_timeout: 30s
workload: {dataset: random, input_len: 32, output_len: 16, request_rate: inf, max_concurrency: 10, endpoint: /v1/completions}
tiers:
  quick: {prompts: 100, repeats: 3, warmup: 10, threshold: 15%%}
`, bin)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "perfgate.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(filepath.Join(dir, "perfgate.yml")); err != nil {
		t.Fatalf("the test's config is invalid: %v", err)
	}
	// Short steps so a run takes a second; GPU-like noise off but the
	// per-step jitter.
	knobs := func(extra string) string {
		return "decode_step: 5ms\nbase_ttft: 2ms\nprefill_per_token: 10us\nprefill_step_overhead: 1ms\n" +
			"jitter: 0.01\nsession_cv: 0\ndrift_per_hour: 0\nthrottle_every: 0s\n" + extra
	}
	repo := ghtest.NewGitRepo(t)
	good := repo.Commit("engine: initial knobs", map[string]string{
		".github/perfgate.yml":      cfg,
		"inference_engine/sim.yaml": knobs("slowdown: 1\n"),
	})
	const planted, broken, n = 8, 9, 12
	shas := map[int]string{0: good}
	for i := 1; i <= n; i++ {
		files := map[string]string{"NOTES": fmt.Sprintf("change %d\n", i)}
		switch i {
		case planted:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.6\n")
		case broken:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.6\nno_such_knob: 1\n")
		case broken + 1:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.6\n")
		}
		shas[i] = repo.Commit(fmt.Sprintf("change %d", i), files)
	}

	// Each commit is measured next to the good one, in the same
	// invocation: no reference file, no --bad.
	repo.Git("checkout", "--quiet", "main")
	repo.Git("bisect", "start", shas[n], good)
	out, err := repo.Run("bisect", "run", bin, "bisect", "run", "--good", good, "--metric", "tpot_median", "--min-change", "10%")
	t.Logf("git bisect run (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("git bisect run: %v", err)
	}
	if !strings.Contains(out, shas[planted]+" is the first bad commit") {
		t.Errorf("git bisect did not name the planted commit %s", shas[planted][:7])
	}
	log := repo.Git("bisect", "log")
	repo.Git("bisect", "reset")
	// git bisect's midpoints are fixed by the graph: after change 6 it tries
	// change 9, whose engine does not start, so perfgate exits 125 and git
	// bisect steps around it.
	if !strings.Contains(log, "git bisect skip "+shas[broken]) {
		t.Errorf("the broken commit %s was not skipped:\n%s", shas[broken][:7], log)
	}
	if !strings.Contains(out, "skip: cannot measure this commit: engine exited during start-up") {
		t.Errorf("the skip does not say why")
	}
}
