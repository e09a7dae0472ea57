package sweep

import (
	"context"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/sim"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json (the capacity package's fixtures) from this run")

// kneeEngine is an engine whose capacity is bounded by its batch: 8
// sequences of 48 tokens, 16 of them decoded at 20 ms a step, about 20
// requests/s. blocks sizes its KV cache: 64 blocks hold the whole batch, 9
// hold three sequences, and the fourth block a sequence needs as it
// decodes preempts another.
func kneeEngine(t *testing.T, blocks int) string {
	t.Helper()
	cfg := sim.DefaultConfig().Quiet()
	cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens, cfg.NumGPUBlocks, cfg.MaxModelLen = 8, 512, blocks, 128
	cfg.DecodeStep, cfg.PerSeqCost, cfg.BaseTTFT, cfg.PrefillStepOverhead = 20*time.Millisecond, 0, 5*time.Millisecond, 0
	cfg.Jitter = 0.02
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(func() { _ = e.Close(); srv.Close() })
	return srv.URL
}

func sweepOf(url, arrivals string, resolution float64) (*capacity.Sweep, error) {
	s, err := capacity.NewSweep(capacity.Plan{Rates: []float64{2, 4, 8, 16, 32}, Resolution: resolution},
		capacity.SLO{TTFTms: 250})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err = Run(ctx, s, Options{
		Bench:       bench.Options{Target: url, Endpoint: bench.EndpointCompletions, InputLen: 32, OutputLen: 16, Seed: 1, CPUShared: true},
		Arrivals:    arrivals,
		StepSeconds: 3,
		MinPrompts:  24,
	})
	return s, err
}

// baseAndHead sweeps the two engines at once: a neighbour that slows the
// host mid-sweep slows both alike (what the runner's interleaved sweep
// gets by alternating them), and the test waits on one sweep's wall time,
// not two.
func baseAndHead(t *testing.T, arrivals string, resolution float64) (base, head *capacity.Sweep) {
	t.Helper()
	urls := [2]string{kneeEngine(t, 64), kneeEngine(t, 9)}
	var sweeps [2]*capacity.Sweep
	var errs [2]error
	var wg sync.WaitGroup
	for i, url := range urls {
		wg.Go(func() { sweeps[i], errs[i] = sweepOf(url, arrivals, resolution) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s sweep: %v", [2]string{"base", "head"}[i], err)
		}
	}
	return sweeps[0], sweeps[1]
}

// The sim has a real knee, and fewer KV blocks move it down while the
// light-load latency stays: the capacity tier's premise. With 9 blocks
// three sequences of 48 tokens fit, so admission holds the batch at three
// (bursts that admit a fourth preempt one as it decodes into its third
// block); with 64 the batch cap of 8 binds.
func TestKVBlocksMoveTheKnee(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps a real engine for about a minute")
	}
	// Poisson arrivals are judged at a coarser resolution: fewer steps,
	// and their bursts blur the knee anyway. The four sweeps run at once:
	// each waits on its engine's 20 ms decode steps, not on the CPU.
	for _, tc := range []struct {
		arrivals   string
		resolution float64
	}{{Constant, 0.15}, {Poisson, 0.4}} {
		arrivals := tc.arrivals
		t.Run(arrivals, func(t *testing.T) {
			t.Parallel()
			base, head := baseAndHead(t, arrivals, tc.resolution)
			bk, hk := base.Knee(), head.Knee()
			t.Logf("base knee %+v, head knee %+v", bk, hk)
			for _, j := range append(base.Steps, head.Steps...) {
				t.Logf("rate %g: sent %d good %d thr %.2f ttft p50 %.1f p99 %.1f tpot %.1f preempt %g sustained %v",
					j.Rate, j.Sent, j.Good, j.Throughput, j.TTFTp50ms, j.TTFTp99ms, j.TPOTp50ms, j.Preemptions, j.Sustained)
			}
			c := capacity.Compare([]capacity.Knee{bk}, []capacity.Knee{hk}, 0.1)
			if c.Verdict == capacity.Inconclusive && strings.HasPrefix(c.Why, "cannot tell") {
				// The machine was too busy for a sweep: the comparison
				// says so rather than guessing (allowed; never a pass).
				t.Logf("the host distorted a sweep: %s", c.Why)
				return
			}
			if c.Verdict != capacity.Regression {
				t.Errorf("verdict %s (%s), want regression", c.Verdict, c.Why)
			}
			if bk.Censored || bk.Rate < 8 {
				t.Errorf("base knee %+v: want a knee between 8 and 32 requests/s", bk)
			}
			bl, hl := base.Steps[0], head.Steps[0]
			if d := hl.TTFTp50ms/bl.TTFTp50ms - 1; d > 0.25 || d < -0.25 {
				t.Errorf("light-load TTFT p50 %.1f → %.1f ms: the KV knob moved light-load latency", bl.TTFTp50ms, hl.TTFTp50ms)
			}
			if d := hl.TPOTp50ms/bl.TPOTp50ms - 1; d > 0.1 || d < -0.1 {
				t.Errorf("light-load TPOT p50 %.1f → %.1f ms: the KV knob moved light-load latency", bl.TPOTp50ms, hl.TPOTp50ms)
			}
			if *update && arrivals == Constant {
				for name, s := range map[string]*capacity.Sweep{"base": base, "head": head} {
					b, _ := json.MarshalIndent(s, "", "  ")
					p := filepath.Join("..", "..", "analysis", "capacity", "testdata", name+".json")
					if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
