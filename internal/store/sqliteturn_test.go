package store

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// The write turn goes to an urgent writer (a webhook's insert) before
// every other waiting writer, to the others first come first served, and a
// writer that gives up waiting leaves the queue without taking a turn.
func TestWriteTurnOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := &writeTurn{}
	if err := w.acquire(ctx, false); err != nil { // a transaction in progress
		t.Fatal(err)
	}
	queued := func(n int) {
		for {
			w.mu.Lock()
			got := len(w.urgent) + len(w.normal)
			w.mu.Unlock()
			if got == n {
				return
			}
			runtime.Gosched()
		}
	}
	order := make(chan string, 4)
	waiter := func(ctx context.Context, name string, urgent bool) {
		if err := w.acquire(ctx, urgent); err != nil {
			order <- name + " gave up"
			return
		}
		order <- name
		w.release()
	}
	gone, giveUp := context.WithCancel(ctx)
	go waiter(ctx, "claim", false)
	queued(1)
	go waiter(gone, "sweep", false)
	queued(2)
	go waiter(ctx, "outbox", false)
	queued(3)
	go waiter(ctx, "ack", true)
	queued(4)
	giveUp()
	if got := <-order; got != "sweep gave up" {
		t.Fatalf("first = %q, want the cancelled waiter to give up", got)
	}
	queued(3)
	w.release()
	for _, want := range []string{"ack", "claim", "outbox"} {
		if got := <-order; got != want {
			t.Fatalf("turn went to %q, want %q", got, want)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held || len(w.urgent)+len(w.normal) != 0 {
		t.Errorf("after everyone: held %v, %d waiting", w.held, len(w.urgent)+len(w.normal))
	}
	if err := (&writeTurn{held: true}).acquire(gone, false); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire on an ended context = %v", err)
	}
}
