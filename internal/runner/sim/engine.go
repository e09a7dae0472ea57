package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// errClosed is returned to a request submitted after Close began.
var errClosed = errors.New("engine is shutting down")

// Engine is a running simulated engine: a scheduler goroutine plus the HTTP
// handlers that feed it.
type Engine struct {
	cfg   Config
	start time.Time
	trace *traceWriter
	stats *engineStats
	prof  *profiler
	reg   *prometheus.Registry
	leak  *leak

	// Pre-encoded so the per-token path copies bytes instead of encoding:
	// by name, every model served (adapters.go).
	modelJSON map[string][]byte

	mu       sync.Mutex
	arrivals []*seq // submitted, not yet seen by the scheduler
	closed   bool
	active   int           // handlers in flight
	drained  chan struct{} // closed when closed && active == 0
	wake     chan struct{} // cap 1: "arrivals changed"
	done     chan struct{} // closed by Close
	schedEnd chan struct{} // closed when the scheduler returns

	errMu  sync.Mutex
	errRNG *rand.Rand

	ids       atomic.Uint64
	closeOnce sync.Once

	// onFinish, when set by a test before any request, sees every sequence
	// the handlers complete.
	onFinish func(s *seq)
	// now is the clock of the startup delay: time.Now, or a test's clock
	// set before the engine serves.
	now func() time.Time
	// answered counts completion requests answered, for CrashAfter; crash
	// ends the process (a test replaces it before any request).
	answered atomic.Int64
	crash    func()
}

// New validates cfg and starts the scheduler.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:       cfg,
		start:     time.Now(),
		now:       time.Now,
		crash:     killSelf,
		trace:     newTraceWriter(cfg.Trace),
		prof:      newProfiler(cfg.ProfileDir),
		modelJSON: modelsJSON(cfg),
		drained:   make(chan struct{}),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		schedEnd:  make(chan struct{}),
		errRNG:    rand.New(rand.NewPCG(uint64(cfg.Seed), streamErrors)),
		leak:      newLeak(cfg.LeakMBPer1kRequests),
	}
	e.stats = newEngineStats(cfg)
	e.stats.leaked = e.leak.leaked
	e.reg = prometheus.NewRegistry()
	// process_resident_memory_bytes and friends, as vLLM's default
	// registry serves them: the soak tier reads the engine's RSS there.
	for _, c := range []prometheus.Collector{e.stats, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := e.reg.Register(c); err != nil {
			return nil, fmt.Errorf("register sim metrics: %w", err)
		}
	}
	sch := newScheduler(e)
	go sch.run()
	return e, nil
}

// Close stops the scheduler, ends open streams with an error event (and no
// [DONE], so clients see them as incomplete) and flushes the trace. Handlers
// get a short grace to write their final records.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		if e.active == 0 {
			close(e.drained)
		}
		e.mu.Unlock()
		close(e.done)
		<-e.schedEnd
		select {
		case <-e.drained:
		case <-time.After(2 * time.Second):
		}
	})
	if err := e.trace.close(); err != nil {
		return fmt.Errorf("close sim engine: %w", err)
	}
	return nil
}

// ready reports whether /health may answer 200.
func (e *Engine) ready() bool {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	return !closed && e.now().Sub(e.start) >= e.cfg.StartupDelay
}

// enter registers a handler so Close can wait for its trace record.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.active++
	return true
}

// answer counts one answered completion request; the CrashAfter-th one
// crashes the engine.
func (e *Engine) answer() {
	if n := e.answered.Add(1); e.cfg.CrashAfter > 0 && n == int64(e.cfg.CrashAfter) {
		e.crash()
	}
}

// killSelf ends the process as a crash does: SIGKILL, no clean-up.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
}

func (e *Engine) leave() {
	e.mu.Lock()
	e.active--
	if e.closed && e.active == 0 {
		close(e.drained)
	}
	e.mu.Unlock()
}

// injectError draws whether this request fails; seeded, so a sequential
// client sees the same pattern every run.
func (e *Engine) injectError() bool {
	if e.cfg.ErrorRate == 0 {
		return false
	}
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.errRNG.Float64() < e.cfg.ErrorRate
}

// submit queues s for the scheduler.
func (e *Engine) submit(s *seq) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	e.arrivals = append(e.arrivals, s)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

// takeArrivals moves the submitted sequences onto dst.
func (e *Engine) takeArrivals(dst []*seq) []*seq {
	e.mu.Lock()
	dst = append(dst, e.arrivals...)
	clear(e.arrivals)
	e.arrivals = e.arrivals[:0]
	e.mu.Unlock()
	return dst
}
