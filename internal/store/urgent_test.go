package store

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// While a webhook is answered, the other statements on a SQLite file —
// the writers' and the readers' — wait for it to be done, and the answer's
// own insert does not.
func TestUrgentHoldsOthersBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*sqlStore)
	s.gate.max = time.Hour // nothing gets through on the bound

	done := st.Urgent()
	if _, err := st.AcceptDelivery(ctx, "d1", "ping", []byte(`{}`), DeliveryOrder{Later: true}); err != nil {
		t.Fatalf("the answer's own insert: %v", err)
	}
	finished := make(chan string, 2)
	go func() {
		if _, err := st.CardMissingSince(ctx, "H100"); err != nil { // a writer
			t.Error(err)
		}
		finished <- "write"
	}()
	go func() {
		if _, err := st.GetDelivery(ctx, "d1"); err != nil { // a reader
			t.Error(err)
		}
		finished <- "read"
	}()
	for { // both are waiting at the gate
		s.gate.mu.Lock()
		n := s.gate.waiting
		s.gate.mu.Unlock()
		if n == 2 {
			break
		}
		select {
		case what := <-finished:
			t.Fatalf("the %s ran while an answer was in flight", what)
		default:
		}
		runtime.Gosched()
	}
	done()
	done() // twice is once
	for range 2 {
		<-finished
	}
	if _, err := st.CardMissingSince(ctx, "A100"); err != nil {
		t.Fatalf("with nothing in flight: %v", err)
	}
}

// A statement yields at most the gate's bound, however long answers keep
// coming, and at once when the last one is done.
func TestUrgentGateBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newUrgentGate()
		start := time.Now()
		g.yield(context.Background())
		if d := time.Since(start); d != 0 {
			t.Errorf("nothing in flight: yielded %s", d)
		}
		endA, endB := g.enter(), g.enter()
		start = time.Now()
		g.yield(context.Background())
		if d := time.Since(start); d != maxYield {
			t.Errorf("answers in flight throughout: yielded %s, want the bound %s", d, maxYield)
		}
		returned := make(chan time.Duration)
		start = time.Now()
		go func() { g.yield(context.Background()); returned <- time.Since(start) }()
		time.Sleep(maxYield / 5)
		endA()
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("yield returned with an answer still in flight")
		default:
		}
		time.Sleep(maxYield / 5)
		endB()
		if d := <-returned; d != 2*maxYield/5 {
			t.Errorf("yielded %s, want until the last answer was done (%s)", d, 2*maxYield/5)
		}
	})
}
