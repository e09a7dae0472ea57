package store

import (
	"context"
	"sync"
	"time"
)

// Urgent work first. On a SQLite file the server's whole store runs in
// its own process, on its own CPUs: the inbox's worker draining a backlog
// (placing 256 deliveries at a time, handling them on several goroutines)
// keeps every Go processor busy, and a webhook's answer, ready to run,
// waited for a processor, and on a host short of CPU for the thread that
// holds it, behind that work: 2.5 s at p99 with a 4,000-delivery backlog,
// two CPU hogs and load average 28, though it waited for the write lock
// only milliseconds (docs/replicas.md, Acknowledging under a backlog).
//
// So while a webhook is being answered (Urgent), every other statement on
// the file — the workers' reads and writes, the dashboard's reads — waits
// before it starts until no answer is in flight, for at most maxYield
// each: the workers park, their processors go to the answer, and the
// backlog still drains between answers. A statement inside a transaction
// never waits (it holds the write lock, which the answer's insert needs),
// nor does the answer's own insert.

// maxYield bounds how long one statement waits for the answers in flight:
// under a steady stream of deliveries the workers still make progress.
const maxYield = 50 * time.Millisecond

// urgentGate counts the answers in flight.
type urgentGate struct {
	max      time.Duration // maxYield; tests lengthen it
	mu       sync.Mutex
	inFlight int
	waiting  int           // statements yielding now (tests watch it)
	clear    chan struct{} // closed when inFlight drops to zero
}

func newUrgentGate() *urgentGate {
	c := make(chan struct{})
	close(c)
	return &urgentGate{max: maxYield, clear: c}
}

// enter marks an answer in flight; the returned func ends it (once).
func (g *urgentGate) enter() func() {
	g.mu.Lock()
	if g.inFlight == 0 {
		g.clear = make(chan struct{})
	}
	g.inFlight++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inFlight--
			if g.inFlight == 0 {
				close(g.clear)
			}
		})
	}
}

// yield waits until no answer is in flight, at most maxYield, or ctx ends.
func (g *urgentGate) yield(ctx context.Context) {
	if g == nil {
		return
	}
	g.mu.Lock()
	clear, busy := g.clear, g.inFlight > 0
	if busy {
		g.waiting++
	}
	g.mu.Unlock()
	if !busy {
		return
	}
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	t := time.NewTimer(g.max)
	defer t.Stop()
	select {
	case <-clear:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Urgent marks a webhook's answer in flight until the returned func is
// called; the other statements on a SQLite file yield to it. On
// PostgreSQL, whose work runs in its own processes, it does nothing.
func (s *sqlStore) Urgent() (done func()) {
	if s.gate == nil {
		return func() {}
	}
	return s.gate.enter()
}
