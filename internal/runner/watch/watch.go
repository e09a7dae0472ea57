// Package watch runs a soak: it keeps a steady load on an engine for a
// long time, one window of requests after another, and after every window
// samples the engine process's RSS (/proc/<pid>/status, or the server's
// process_resident_memory_bytes), the card's used memory, the server's
// /metrics (prefix-cache hit rate over the window, preemptions, KV usage)
// and the window's client latencies, into the samples the pure soak
// package judges. It is the runner agent's half of the soak tier.
package watch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Defaults of Options.
const (
	DefaultWindow = 30 * time.Second
	DefaultRate   = 4.0
)

// Clock is the time a soak's schedule and sample times come from.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// GPUMemory is the card the engine runs on (gpu.Device satisfies it).
type GPUMemory interface {
	Sample(ctx context.Context) (gpu.Sample, error)
}

// Options say what load to keep and what to watch.
type Options struct {
	// Bench is the load of every window: target, dataset, lengths, seed.
	// Its NumPrompts and RequestRate are set from Rate and Window.
	Bench bench.Options
	// Rate is the steady load, requests/s (Poisson arrivals).
	Rate float64
	// Duration is how long the soak runs; Window how long each window of
	// load lasts (one sample per window).
	Duration, Window time.Duration
	// PID is the engine process whose RSS is read; 0 reads the server's
	// process_resident_memory_bytes instead.
	PID int
	// GPU, when set, is sampled for used memory.
	GPU GPUMemory
	// Clock is the soak's time; nil is the wall clock.
	Clock Clock
	// Run offers one window; nil is bench.Run.
	Run func(context.Context, bench.Options) (*result.Result, error)
	Log zerolog.Logger
}

// Run keeps the load on for o.Duration and returns one sample at the start
// and one after every window. A window whose benchmark fails ends the soak
// with the samples so far and the error.
func Run(ctx context.Context, o Options) ([]soak.Sample, error) {
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Run == nil {
		o.Run = bench.Run
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Duration < o.Window {
		return nil, fmt.Errorf("soak duration %s is shorter than one window (%s): lengthen it", o.Duration, o.Window)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	metricsURL := strings.TrimRight(o.Bench.Target, "/") + "/metrics"
	start := o.Clock.Now()

	var out []soak.Sample
	prev, _ := scrapeServer(ctx, client, metricsURL)
	out = append(out, o.sample(ctx, 0, prev, prev, nil))
	for o.Clock.Now().Sub(start) < o.Duration {
		bo := o.Bench
		bo.RequestRate = result.Rate(o.Rate)
		bo.NumPrompts = max(1, int(math.Round(o.Rate*o.Window.Seconds())))
		bo.Burstiness = 1
		r, err := o.Run(ctx, bo)
		if err != nil {
			return out, fmt.Errorf("soak window %d: %w", len(out), err)
		}
		cur, err := scrapeServer(ctx, client, metricsURL)
		if err != nil {
			o.Log.Warn().Err(err).Msg("soak: engine /metrics unreadable this window")
		}
		at := o.Clock.Now().Sub(start).Seconds()
		s := o.sample(ctx, at, prev, cur, r)
		out = append(out, s)
		prev = cur
		o.Log.Info().Float64("at_s", at).Float64("rss_mb", s.RSSBytes/(1<<20)).Float64("hit_rate", s.PrefixHitRate).
			Float64("ttft_p50_ms", s.TTFTp50ms).Int("requests", s.Requests).Msg("soak sample")
		if ctx.Err() != nil {
			return out, fmt.Errorf("soak: %w", ctx.Err())
		}
	}
	return out, nil
}

// sample reads the engine's state after a window (r nil: before any).
func (o Options) sample(ctx context.Context, at float64, prev, cur serverState, r *result.Result) soak.Sample {
	s := soak.Sample{AtS: at, RSSBytes: cur.rss, GPUMemBytes: soak.Unknown, PrefixHitRate: soak.Unknown,
		KVUsage: cur.kvUsage, Preemptions: cur.preemptions, TTFTp50ms: soak.Unknown, TPOTp50ms: soak.Unknown}
	if o.PID > 0 {
		if rss, err := RSS(o.PID); err == nil {
			s.RSSBytes = rss
		} else {
			o.Log.Warn().Err(err).Msg("soak: engine RSS unreadable")
		}
	}
	if o.GPU != nil {
		if g, err := o.GPU.Sample(ctx); err == nil {
			s.GPUMemBytes = g.MemUsedMiB * (1 << 20)
		} else if !errors.Is(err, gpu.ErrUnavailable) {
			o.Log.Warn().Err(err).Msg("soak: GPU memory unreadable")
		}
	}
	if q := cur.prefixQueries - prev.prefixQueries; q > 0 {
		s.PrefixHitRate = (cur.prefixHits - prev.prefixHits) / q
	}
	if r != nil {
		s.Requests = r.Completed
		if r.Completed > 0 {
			s.TTFTp50ms, s.TPOTp50ms = r.Metrics["median_ttft_ms"], r.Metrics["median_tpot_ms"]
		}
	}
	return s
}

func nan() float64 { return math.NaN() }
