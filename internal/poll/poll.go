// Package poll waits in tests for something to happen, bounded by the
// test's own deadline (go test -timeout), never by a guess of how long a
// loaded machine takes. A wait that would pass on an idle machine passes
// on a busy one; one that never ends still fails, with its own message,
// before go test's timeout panics.
package poll

import (
	"context"
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 10 * time.Millisecond

// Context returns a context that ends shortly before the test's deadline
// (see Deadline), and with the test.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx := t.Context()
	if d, ok := Deadline(t); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		t.Cleanup(cancel)
	}
	return ctx
}

// Deadline is the test binary's deadline less a margin for the test to
// report and clean up: a tenth of the time left, at most 30 s. ok is false
// when go test runs without a timeout.
func Deadline(t testing.TB) (time.Time, bool) {
	dt, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	d, ok := dt.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-min(time.Until(d)/10, 30*time.Second)), true
}

// Until checks cond every Interval until it holds, and fails the test,
// naming what it waited for, when the test's deadline nears first.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := UntilContext(Context(t), cond); err != nil {
		t.Fatalf("gave up waiting for %s: %v", what, err)
	}
}

// UntilContext checks cond every Interval until it holds or ctx ends.
func UntilContext(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
	return nil
}
