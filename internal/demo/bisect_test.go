package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/poll"
)

// TestBisectFindsThePlantedCommit runs `/perf bisect` end to end: eight
// commits land on main, the fifth sets inference_engine/sim.yaml's
// slowdown; a maintainer asks on an issue; the server lists the commits
// through the local GitHub's compare API, the runner starts the simulated
// engine from each measured commit's checkout, and the report on the issue
// names the planted commit.
func TestBisectFindsThePlantedCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine for about a minute")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	var log strings.Builder
	out, err := RunBisect(ctx, BisectOptions{Dir: t.TempDir(), Commits: 8, Planted: 5, Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	checkBisect(t, out, 8, EngineSim, log.String())
	for _, want := range []string{"Bisect started: 8 commits after good", "planted: " + short(out.Planted), "found:   " + short(out.Planted)} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the scenario does not print %q:\n%s", want, log.String())
		}
	}
	t.Logf("N=8: %d steps, %d GPU jobs, %d runs, %s\n%s", out.Steps, out.Jobs, out.Runs, out.Elapsed.Round(time.Second), log.String())
}

// checkBisect: the bisect found the planted commit, within ⌈log2 n⌉ + 3
// commits measured between the ends, and its report says so with the
// evidence.
func checkBisect(t *testing.T, out *BisectOutcome, n int, engine, log string) {
	t.Helper()
	if out.Status != bisect.Found || out.Found != out.Planted {
		t.Fatalf("bisect %s, found %q; want the planted %s\n%s", out.Status, out.Found, out.Planted, log)
	}
	if len(out.Pins) != out.Jobs {
		t.Errorf("%d bisect jobs in the queue, the bisect counted %d", len(out.Pins), out.Jobs)
	}
	for i, pin := range out.Pins[1:] {
		if pin == "" || pin != out.Pins[1] {
			t.Errorf("job %d pinned to %q, want every job after the first on the first's card %q", i+2, pin, out.Pins[1])
		}
	}
	if limit := bisect.Steps(n) + 3; out.Steps > limit {
		t.Errorf("%d commits measured between the ends, want at most ⌈log2 %d⌉ + 3 = %d", out.Steps, n, limit)
	}
	for _, want := range []string{"**Culprit: [`" + short(out.Planted) + "`]", plantedTitle(engine), "| after job | commit |", "Bisect asked for by @" + bisectMaintainer} {
		if !strings.Contains(out.Report, want) {
			t.Errorf("report lacks %q:\n%s", want, out.Report)
		}
	}
}

// TestBisectSteps measures bisects of 16 and 64 commits end to end (the
// issue's numbers), the slowdown planted at a different place in each of
// PERFGATE_E2E_BISECT runs per size:
//
//	PERFGATE_E2E_BISECT=3 go test -run TestBisectSteps -v -timeout 2h ./internal/demo
//
// PERFGATE_E2E_BISECT_SLOWDOWN sets the planted slowdown (1.2 by default).
func TestBisectSteps(t *testing.T) {
	var reps int
	fmt.Sscan(os.Getenv("PERFGATE_E2E_BISECT"), &reps)
	if reps <= 0 || testing.Short() {
		t.Skip("a measurement: set PERFGATE_E2E_BISECT=<runs per size> to run it")
	}
	slowdown := 1.2
	if v := os.Getenv("PERFGATE_E2E_BISECT_SLOWDOWN"); v != "" {
		if _, err := fmt.Sscan(v, &slowdown); err != nil || slowdown <= 1 {
			t.Fatalf("PERFGATE_E2E_BISECT_SLOWDOWN=%q: want a number above 1", v)
		}
	}
	for _, n := range []int{16, 64} {
		for rep := range reps {
			planted := 1 + (rep*7919+n/3)%n // spread over the range, the same every time
			t.Run(fmt.Sprintf("N=%d/planted=%d", n, planted), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
				defer cancel()
				var log strings.Builder
				out, err := RunBisect(ctx, BisectOptions{Dir: t.TempDir(), Commits: n, Planted: planted, Slowdown: slowdown, Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log})
				if err != nil {
					t.Fatalf("%v\n%s", err, log.String())
				}
				fmt.Printf("bisect N=%d planted=%d slowdown=%g: %s %s, steps %d (⌈log2 N⌉ = %d), GPU jobs %d, runs %d, %s\n",
					n, planted, slowdown, out.Status, map[bool]string{true: "the planted commit", false: "WRONG commit"}[out.Found == out.Planted],
					out.Steps, bisect.Steps(n), out.Jobs, out.Runs, out.Elapsed.Round(time.Second))
				t.Logf("the report:\n%s", out.Report)
				checkBisect(t, out, n, EngineSim, log.String())
			})
		}
	}
}

// TestOllamaBisect bisects a real regression on the real engine: 16
// commits land on main in the Ollama layout, one of them adds a fifth
// transformer block to model/perfgate-tiny.gguf (about +19% work per
// token); a maintainer's `/perf bisect` has the runner start Ollama from
// each measured commit's checkout, and the report must name that commit.
// PERFGATE_E2E_OLLAMA_BISECT runs, the planted commit spread over the
// range (a measurement, minutes per run; needs the ollama binary):
//
//	PERFGATE_E2E_OLLAMA_BISECT=3 go test -run TestOllamaBisect -v -timeout 2h ./internal/demo
func TestOllamaBisect(t *testing.T) {
	var reps int
	fmt.Sscan(os.Getenv("PERFGATE_E2E_OLLAMA_BISECT"), &reps)
	if reps <= 0 || testing.Short() {
		t.Skip("a measurement: set PERFGATE_E2E_OLLAMA_BISECT=<runs> to run it")
	}
	ollama, err := FindOllama()
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	for rep := range reps {
		planted := 1 + (rep*7+5)%n // 6, 13, 4, 11, …: spread over the range, the same every time
		t.Run(fmt.Sprintf("N=%d/planted=%d", n, planted), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
			defer cancel()
			var log strings.Builder
			out, err := RunBisect(ctx, BisectOptions{Dir: t.TempDir(), Commits: n, Planted: planted, Engine: EngineOllama, Ollama: ollama,
				Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log})
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			fmt.Printf("ollama bisect N=%d planted=%d: %s %s, steps %d (⌈log2 N⌉ = %d), jobs %d, runs %d, %s\n",
				n, planted, out.Status, map[bool]string{true: "the planted commit", false: "WRONG commit"}[out.Found == out.Planted],
				out.Steps, bisect.Steps(n), out.Jobs, out.Runs, out.Elapsed.Round(time.Second))
			t.Logf("the scenario:\n%s", log.String())
			checkBisect(t, out, n, EngineOllama, log.String())
		})
	}
}

// TestBisectWorkload: the bisect scenario's config and knobs are the ones
// a busy machine measures steadily (bisectConfig's edits of the shared
// config took, which a silent strings.Replace would not say).
func TestBisectWorkload(t *testing.T) {
	t.Parallel()
	c := bisectConfig("/usr/bin/perfgate")
	for _, want := range []string{"  output_len: 16\n", "  max_concurrency: 25\n", "    warmup: 4\n"} {
		if !strings.Contains(c, want) {
			t.Errorf("the bisect scenario's config lacks %q:\n%s", want, c)
		}
	}
	if k := bisectKnobs(1.2); !strings.Contains(k, "decode_step: 40ms\n") || !strings.Contains(k, "slowdown: 1.2\n") {
		t.Errorf("the bisect scenario's knobs:\n%s", k)
	}
}
