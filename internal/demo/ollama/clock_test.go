package ollama_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// TestOllamaEngineClock sets perfgate bench's TTFT and TPOT beside
// Ollama's own clock for the same requests: bench runs on Ollama's native
// /api/generate (--backend ollama), whose last line of each answer carries
// load_duration, prompt_eval_duration, eval_count and eval_duration, at
// concurrency 1, 4 and 16 (the engine has OLLAMA_NUM_PARALLEL=4 slots),
// for 8 and 64 output tokens; the same prompts on /v1/completions give
// the OpenAI-compatible endpoint's TPOT beside them. It prints one table,
// with the load average before and after each run.
// PERFGATE_E2E_OLLAMA_CLOCK_ROUNDS sets the rounds of the 64-token runs
// on the two endpoints (2 by default).
//
// On a quiet machine (1-minute load average below the number of CPUs
// before and after the run) bench's TPOT must lie within 5% of Ollama's
// eval_duration / eval_count at concurrency 1 and 4 with 64 output
// tokens; on a busy one the rows are printed and not judged.
//
// A measurement, not part of the suite:
//
//	PERFGATE_E2E_OLLAMA_CLOCK=1 go test -run TestOllamaEngineClock -v ./internal/demo/ollama
func TestOllamaEngineClock(t *testing.T) {
	if os.Getenv("PERFGATE_E2E_OLLAMA_CLOCK") == "" {
		t.Skip("a measurement: set PERFGATE_E2E_OLLAMA_CLOCK=1 to run it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	srv := startOllama(t, ctx)
	const prompts, inputLen = 48, 16
	var table strings.Builder
	fmt.Fprintf(&table, "| concurrency | output tokens | endpoint | load avg before → after | bench TTFT | Ollama load + prompt eval | bench TPOT | Ollama eval_duration / eval_count | gap | eval_duration / (eval_count − 1) | gap | gaps < 0.1 ms: client, engine | delivery-bound |\n")
	fmt.Fprintf(&table, "|--:|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	run := func(c, out int, backend string) *result.Result {
		before := loadAvg(t)
		res, err := bench.Run(ctx, bench.Options{Target: srv.BaseURL(), Backend: backend, Model: demo.OllamaModel, Dataset: "random",
			InputLen: inputLen, OutputLen: out, NumPrompts: prompts, MaxConcurrency: c, Warmup: 4, Seed: 7, Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatalf("concurrency %d, %d tokens, %s: %v", c, out, backend, err)
		}
		after := loadAvg(t)
		ttft, _ := res.Metric("median_ttft_ms")
		tpot, _ := res.Metric("median_tpot_ms")
		burst, bound := "", ""
		if d := res.Perfgate.Client.Delivery; d != nil {
			burst, bound = fmt.Sprintf("%.0f%%", 100*d.BurstShare), strconv.FormatBool(d.DeliveryBound)
			if d.EngineGaps > 0 {
				burst += fmt.Sprintf(", %.0f%%", 100*d.EngineBurstShare)
			}
		}
		e := res.Perfgate.EngineClock
		if e == nil {
			fmt.Fprintf(&table, "| %d | %d | %s | %.1f → %.1f | %.2f ms | | %.3f ms | | | | | %s | %s |\n", c, out, res.Perfgate.Load.Endpoint, before, after, ttft, tpot, burst, bound)
			return res
		}
		fmt.Fprintf(&table, "| %d | %d | %s | %.1f → %.1f | %.2f ms | %.2f ms | %.3f ms | %.3f ms | %+.1f%% | %.3f ms | %+.1f%% | %s | %s |\n",
			c, out, res.Perfgate.Load.Endpoint, before, after, ttft, e.EngineTTFTMS, tpot, e.EngineTPOTMS, 100*e.TPOTGap, e.EngineStepMS, 100*e.StepGap, burst, bound)
		quiet := before < float64(runtime.NumCPU()) && after < float64(runtime.NumCPU())
		if out >= 64 && c <= 4 && quiet && math.Abs(e.TPOTGap) > 0.05 {
			t.Errorf("concurrency %d, %d tokens, quiet machine (load %.1f → %.1f): bench TPOT %.3f ms is %+.1f%% from Ollama's eval_duration / eval_count %.3f ms (> 5%%)",
				c, out, before, after, e.ClientTPOTMS, 100*e.TPOTGap, e.EngineTPOTMS)
		}
		if e.OutputTokens != float64(out) {
			t.Errorf("concurrency %d: median eval_count %g, want %d", c, e.OutputTokens, out)
		}
		return res
	}
	// Rounds alternate the endpoints' order (ABBA), so a drift in the
	// machine's load does not read as a difference between them.
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("PERFGATE_E2E_OLLAMA_CLOCK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for _, c := range []int{1, 4, 16} {
		run(c, 8, "ollama")
		for r := range rounds {
			order := []string{"ollama", "openai"}
			if r%2 == 1 {
				order = []string{"openai", "ollama"}
			}
			for _, backend := range order {
				run(c, 64, backend)
			}
		}
	}
	t.Logf("%d prompts of %d words, medians over requests, %d CPUs:\n%s", prompts, inputLen, runtime.NumCPU(), table.String())
}

// loadAvg is the 1-minute load average.
func loadAvg(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Skipf("no load average here: %v", err)
	}
	f := strings.Fields(string(b))
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("/proc/loadavg %q: %v", b, err)
	}
	return v
}
