package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// maxLag is how far behind its schedule the step loop may run and still
// shorten the next step to catch up: enough to absorb timer overshoot and
// loop overhead, too little to distort a step.
const maxLag = time.Millisecond

// errClosed is returned to a request submitted after Close began.
var errClosed = errors.New("engine is shutting down")

// Engine is a running simulated engine: a scheduler goroutine plus the HTTP
// handlers that feed it.
type Engine struct {
	cfg   Config
	start time.Time
	step  *stepModel
	trace *traceWriter

	// Pre-encoded so the per-token path copies bytes instead of encoding.
	modelJSON []byte

	mu       sync.Mutex
	waiting  []*seq
	closed   bool
	active   int           // handlers in flight
	drained  chan struct{} // closed when closed && active == 0
	wake     chan struct{} // cap 1: "the waiting queue changed"
	done     chan struct{} // closed by Close
	schedEnd chan struct{} // closed when the scheduler returns

	errMu  sync.Mutex
	errRNG *rand.Rand

	ids       atomic.Uint64
	closeOnce sync.Once

	// onFinish, when set by a test before any request, sees every sequence
	// the handlers complete.
	onFinish func(s *seq)
}

// seq is one request's life in the engine. The scheduler alone writes gen,
// stallUntil, firstStep and lastStep; the handler reads the token count
// through produced, whose atomic store publishes the others.
type seq struct {
	promptTokens int
	maxTokens    int
	stallAt      int // tokens after which the stream stalls; 0 = never

	produced  atomic.Int64
	cancelled atomic.Bool
	notify    chan struct{} // cap 1: "produced moved"

	gen        int
	stallUntil time.Time
	firstStep  int64
	lastStep   int64
}

func newSeq(promptTokens, maxTokens, stallAt int) *seq {
	return &seq{promptTokens: promptTokens, maxTokens: maxTokens, stallAt: stallAt, notify: make(chan struct{}, 1)}
}

// New validates cfg and starts the scheduler.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:       cfg,
		start:     time.Now(),
		step:      newStepModel(cfg),
		trace:     newTraceWriter(cfg.Trace),
		modelJSON: jsonString(cfg.Model),
		drained:   make(chan struct{}),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		schedEnd:  make(chan struct{}),
		errRNG:    rand.New(rand.NewPCG(uint64(cfg.Seed), streamErrors)),
	}
	go e.schedule()
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
	return !closed && time.Since(e.start) >= e.cfg.StartupDelay
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

// submit queues s for admission by the scheduler.
func (e *Engine) submit(s *seq) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

// schedule is the engine loop. Each step admits queued sequences while the
// batch has room (they pay their prefill inside that step), waits out the
// step time and then gives every running sequence one token. Step deadlines
// advance from the previous deadline, not from "now", so sleep overshoot does
// not accumulate while the engine is busy.
func (e *Engine) schedule() {
	defer close(e.schedEnd)
	var (
		running  []*seq
		next     time.Time
		busy     bool
		stepNo   int64
		stall    = time.Duration(e.cfg.StallMS) * time.Millisecond
		timer    = time.NewTimer(time.Hour)
		maxBatch = e.cfg.MaxNumSeqs
	)
	timer.Stop()
	defer timer.Stop()

	for {
		var prefill time.Duration
		e.mu.Lock()
		taken := 0
		for taken < len(e.waiting) && len(running) < maxBatch {
			s := e.waiting[taken]
			taken++
			if s.cancelled.Load() {
				continue
			}
			running = append(running, s)
			prefill += e.step.prefill(s.promptTokens)
		}
		if taken > 0 {
			rest := copy(e.waiting, e.waiting[taken:])
			clear(e.waiting[rest:])
			e.waiting = e.waiting[:rest]
		}
		e.mu.Unlock()

		now := time.Now()
		running = dropCancelled(running)
		active, wakeAt := 0, time.Time{}
		for _, s := range running {
			if now.Before(s.stallUntil) {
				if wakeAt.IsZero() || s.stallUntil.Before(wakeAt) {
					wakeAt = s.stallUntil
				}
				continue
			}
			active++
		}
		if active == 0 {
			// Nothing can make progress: block until a request arrives, a
			// stall ends or Close, instead of spinning.
			busy = false
			var stallEnd <-chan time.Time
			if !wakeAt.IsZero() {
				timer.Reset(time.Until(wakeAt))
				stallEnd = timer.C
			}
			select {
			case <-e.wake:
			case <-stallEnd:
			case <-e.done:
				return
			}
			timer.Stop()
			continue
		}

		d := e.step.duration(len(running), prefill)
		switch {
		case !busy:
			next = now
		case now.Sub(next) > maxLag:
			// Descheduled: restart the clock rather than shortening the
			// next steps to catch up, which would hand a new request its
			// first token before its prefill time.
			next = now.Add(-maxLag)
		}
		busy = true
		next = next.Add(d)
		if wait := time.Until(next); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-e.done:
				return
			}
		} else {
			select {
			case <-e.done:
				return
			default:
			}
		}

		stepNo++
		now = time.Now()
		keep := running[:0]
		for _, s := range running {
			if s.cancelled.Load() {
				continue
			}
			if now.Before(s.stallUntil) {
				keep = append(keep, s)
				continue
			}
			s.gen++
			if s.gen == 1 {
				s.firstStep = stepNo
			}
			if s.gen >= s.maxTokens {
				s.lastStep = stepNo
			}
			s.produced.Store(int64(s.gen))
			select {
			case s.notify <- struct{}{}:
			default:
			}
			if s.gen >= s.maxTokens {
				continue
			}
			if stall > 0 && s.gen == s.stallAt {
				s.stallUntil = now.Add(stall)
			}
			keep = append(keep, s)
		}
		clear(running[len(keep):])
		running = keep
	}
}

func dropCancelled(running []*seq) []*seq {
	keep := running[:0]
	for _, s := range running {
		if !s.cancelled.Load() {
			keep = append(keep, s)
		}
	}
	clear(running[len(keep):])
	return keep
}
