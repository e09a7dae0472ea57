package ollama_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
)

// startOllama starts the demo's real engine for a test, or skips where
// there is none (except under CI, which must run it).
func startOllama(t *testing.T, ctx context.Context) *engine.Server {
	t.Helper()
	return startOllamaIn(t, ctx, t.TempDir())
}

// startOllamaIn is startOllama with main's files written to dir.
func startOllamaIn(t *testing.T, ctx context.Context, dir string) *engine.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("a real engine")
	}
	ollama, err := demo.FindOllama()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the real-engine tests: %v", err)
		}
		t.Skipf("no real engine here: %v", err)
	}
	srv, err := demo.StartOllama(ctx, dir, ollama, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = srv.Stop(sctx)
	})
	return srv
}

// TestBenchOnOllama is perfgate bench against what Ollama really sends: a
// usage block on every chunk (zeros until the last), finish_reason
// "length", no /tokenize and no /metrics; and a model it does not serve.
func TestBenchOnOllama(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := startOllama(t, ctx)
	opts := func(model string) bench.Options {
		return bench.Options{Target: srv.BaseURL(), Model: model, Dataset: "random", InputLen: 16, OutputLen: 8,
			NumPrompts: 12, MaxConcurrency: 4, Seed: 1, IgnoreEOS: true, Timeout: 3 * time.Minute}
	}
	for _, tc := range []struct {
		name, model string
		want        []string // in the probe's error; none: the run succeeds
	}{
		{"a model it does not serve", "missing-model", []string{"HTTP 404", "missing-model", "not found", "pass --model " + demo.OllamaModel}},
		{"the served model", demo.OllamaModel, nil},
		{"the first model listed", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := bench.Run(ctx, opts(tc.model))
			if tc.want != nil {
				var pe *bench.ProbeError
				if !errors.As(err, &pe) {
					t.Fatalf("err %v, want the first request's refusal", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := res.Perfgate
			if res.Completed != 12 || res.Failed != 0 || p == nil || p.TokenSource != "usage" {
				t.Fatalf("completed %d failed %d, token source %q: want 12 requests counted from Ollama's usage block", res.Completed, res.Failed, p.TokenSource)
			}
			for i, n := range res.OutputLens {
				if n != 8 {
					t.Errorf("request %d: %d output tokens, want 8 (max_tokens; finish_reason length)", i, n)
				}
			}
			if res.TotalOutputTokens != 96 || res.OutputThroughput <= 0 {
				t.Errorf("total output %d tokens at %.1f tok/s", res.TotalOutputTokens, res.OutputThroughput)
			}
			if m, _ := res.Metric("median_tpot_ms"); m <= 0 {
				t.Errorf("median TPOT %v", m)
			}
			if p.ServerMetrics == nil || p.ServerMetrics.Available {
				t.Errorf("server metrics %+v: Ollama has no /metrics, which the result must say", p.ServerMetrics)
			}
		})
	}
}
