package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
// knobs (inference_engine/sim.yaml, read by perfgate sim --config, the
// demo's engine with its per-start noise): one commit makes every step 8%
// slower, the next has a key the sim refuses. git bisect must name the
// slow commit — never another — and skip the broken one when it lands on
// it. Each step measures its commit interleaved with the good one, sized to
// the noise, so a loaded machine costs pairs, not the answer.
//
// 8 commits by default; PERFGATE_BISECT_COMMITS=32 is the history
// (docs/bisect.md).
func TestBisectRunUnderGitBisect(t *testing.T) {
	if testing.Short() {
		t.Skip("builds perfgate and runs git bisect: not in -short")
	}
	// Beside the package's other parallel tests: it waits on the engines'
	// 20 ms steps, they on the CPU. Like them it starts once the sequential
	// tests, which set the process's environment and directory, are done.
	t.Parallel()
	n := 8
	if v := os.Getenv("PERFGATE_BISECT_COMMITS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 4 {
			t.Fatalf("PERFGATE_BISECT_COMMITS=%q: want a number of commits, at least 4", v)
		}
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
	// config (read from each checkout) starts the sim with them. A run is
	// 100 requests of 16 tokens, 25 in flight, on 20 ms steps: about a
	// second, long steps so a busy host's late wake-ups stay small.
	cfg := fmt.Sprintf(`server:
  command: ["%s", "sim", "--config", "{{.Workdir}}/inference_engine/sim.yaml", "--port", "{{.Port}}"]
  model: perfgate-sim
  start_timeout: 30s
workload: {dataset: random, input_len: 32, output_len: 16, request_rate: inf, max_concurrency: 25, endpoint: /v1/completions}
tiers:
  quick: {prompts: 100, repeats: 3, warmup: 4, threshold: 15%%}
`, bin)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "perfgate.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(filepath.Join(dir, "perfgate.yml")); err != nil {
		t.Fatalf("the test's config is invalid: %v", err)
	}
	knobs := func(extra string) string {
		return "model: perfgate-sim\ndecode_step: 20ms\nper_seq_cost: 40us\nprefill_step_overhead: 3ms\nbase_ttft: 12ms\nprefill_per_token: 20us\ninstance_seed: 7\n" + extra
	}
	repo := ghtest.NewGitRepo(t)
	good := repo.Commit("engine: initial knobs", map[string]string{
		".github/perfgate.yml":      cfg,
		"inference_engine/sim.yaml": knobs("slowdown: 1\n"),
	})
	planted := 2*n/3 + 1
	broken := planted + 1
	shas := map[int]string{0: good}
	for i := 1; i <= n; i++ {
		files := map[string]string{"NOTES": fmt.Sprintf("change %d\n", i)}
		switch i {
		case planted:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.08\n")
		case broken:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.08\nno_such_knob: 1\n")
		case broken + 1:
			files["inference_engine/sim.yaml"] = knobs("slowdown: 1.08\n")
		}
		shas[i] = repo.Commit(fmt.Sprintf("change %d", i), files)
	}
	index := map[string]int{}
	for i, sha := range shas {
		index[sha] = i
	}

	// Each commit is measured next to the good one, in the same
	// invocation; the bad end once, on the first step.
	repo.Git("checkout", "--quiet", "main")
	repo.Git("bisect", "start", shas[n], good)
	out, err := repo.Run("bisect", "run", bin, "bisect", "run", "--good", good, "--metric", "tpot_median")
	t.Logf("git bisect run over %d commits, +8%% planted at %d (%s):\n%s", n, planted, time.Since(start).Round(time.Millisecond), out)
	log := repo.Git("bisect", "log")
	repo.Git("bisect", "reset")
	if err != nil {
		t.Fatalf("git bisect run: %v", err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if sha, ok := strings.CutSuffix(strings.TrimSpace(line), " is the first bad commit"); ok && sha != shas[planted] {
			t.Fatalf("git bisect named commit %d (%.7s), not the planted %d (%.7s)", index[sha], sha, planted, shas[planted])
		}
	}
	if !strings.Contains(out, shas[planted]+" is the first bad commit") {
		t.Errorf("git bisect did not name the planted commit %d (%.7s)", planted, shas[planted])
	}
	// Every verdict git bisect recorded is right: good before the planted
	// commit, bad from it on.
	for line := range strings.SplitSeq(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "git" || f[1] != "bisect" || (f[2] != "good" && f[2] != "bad") {
			continue
		}
		i, ok := index[f[3]]
		if want := map[bool]string{true: "bad", false: "good"}[i >= planted]; ok && f[2] != want {
			t.Errorf("commit %d (%.7s) was called %s, want %s", i, f[3], f[2], want)
		}
	}
	if strings.Contains(log, "git bisect skip "+shas[broken]) && !strings.Contains(out, "skip: cannot measure this commit: engine exited during start-up") {
		t.Errorf("the broken commit was skipped without saying why")
	}
}
