package gpu

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// DefaultInterval is how often a Sampler reads the card.
const DefaultInterval = 200 * time.Millisecond

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	Interval time.Duration // DefaultInterval when 0
	// Allow says whether a PID on the GPU belongs to the run (see AllowPIDs,
	// AllowDescendants). Nil allows none: any process on the card then
	// invalidates the run.
	Allow func(pid uint32) bool
	Log   zerolog.Logger
}

// Sampler reads a Device every interval during one measured run.
type Sampler struct {
	dev Device
	cfg SamplerConfig

	mu      sync.Mutex
	run     Run
	started bool
	reason  string // why telemetry is unavailable; "" when it is available
	cancel  context.CancelFunc
	done    chan struct{}
	summary *result.GPUSummary
}

// NewSampler returns a sampler of dev. A nil dev samples nothing and yields
// a summary marked unavailable.
func NewSampler(dev Device, cfg SamplerConfig) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if dev == nil {
		dev = UnavailableDevice(nil)
	}
	return &Sampler{dev: dev, cfg: cfg}
}

// Start reads the card's configuration, takes the first sample and keeps
// sampling until Stop or until ctx ends. When the card cannot be read the
// run goes on without telemetry: one log line, no error.
func (s *Sampler) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	info, err := s.dev.Info(ctx)
	if err != nil {
		s.reason = err.Error()
		s.cfg.Log.Warn().Err(err).Msg("GPU telemetry unavailable for this run: recording it without GPU metrics")
		return
	}
	s.run = Run{Before: info, Start: time.Now(), Interval: s.cfg.Interval, Allow: s.cfg.Allow}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.sampleLocked(ctx)
	go s.loop(ctx)
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			s.sampleLocked(ctx)
			s.mu.Unlock()
		}
	}
}

func (s *Sampler) sampleLocked(ctx context.Context) {
	smp, err := s.dev.Sample(ctx)
	if err != nil {
		if s.run.SampleErrors == 0 {
			s.run.FirstError = err.Error()
			s.cfg.Log.Warn().Err(err).Msg("GPU sample failed")
		}
		s.run.SampleErrors++
		return
	}
	s.run.Samples = append(s.run.Samples, Timed{At: time.Now(), Sample: smp})
}

// Stop ends sampling, takes a last sample and reads the configuration again,
// and returns the summary. Later calls return the same summary.
func (s *Sampler) Stop() result.GPUSummary {
	s.mu.Lock()
	if s.summary != nil {
		defer s.mu.Unlock()
		return *s.summary
	}
	if !s.started || s.reason != "" {
		reason := s.reason
		if !s.started {
			reason = "GPU sampler was not started"
		}
		sum := result.GPUSummary{Available: false, Reason: reason, Valid: true, IntervalMS: int(s.cfg.Interval / time.Millisecond)}
		s.summary = &sum
		s.mu.Unlock()
		return sum
	}
	cancel, done := s.cancel, s.done
	s.mu.Unlock()

	cancel()
	<-done

	s.mu.Lock()
	defer s.mu.Unlock()
	// A fresh context: the run's may be over, and the closing reads are what
	// catch a change made during the run.
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	s.sampleLocked(ctx)
	s.run.End = time.Now()
	if after, err := s.dev.Info(ctx); err == nil {
		s.run.After = after
	} else {
		s.cfg.Log.Warn().Err(err).Msg("read GPU configuration after the run")
	}
	sum := Summarize(s.run)
	s.summary = &sum
	return sum
}
