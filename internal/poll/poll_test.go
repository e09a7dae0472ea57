package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilContextReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	n := 0
	if err := UntilContext(context.Background(), func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("UntilContext = %v after %d checks, want nil after 3", err, n)
	}
}

func TestUntilContextEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := UntilContext(ctx, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("UntilContext on a cancelled context = %v, want context.Canceled", err)
	}
}

// fakeT is a test with a deadline.
type fakeT struct {
	testing.TB
	deadline time.Time
}

func (f fakeT) Deadline() (time.Time, bool) { return f.deadline, true }

func TestDeadlineLeavesAMargin(t *testing.T) {
	t.Parallel()
	margin := func(left time.Duration) time.Duration { return min(left/10, 30*time.Second) }
	for _, left := range []time.Duration{10 * time.Minute, 100 * time.Second, time.Second} {
		end := time.Now().Add(left)
		before := time.Now()
		d, ok := Deadline(fakeT{TB: t, deadline: end})
		after := time.Now()
		if !ok {
			t.Fatal("no deadline")
		}
		// The margin is a tenth of what was left when Deadline read the
		// clock, at most 30 s: between the readings either side of it.
		if got, lo, hi := end.Sub(d), margin(end.Sub(after)), margin(end.Sub(before)); got < lo || got > hi {
			t.Errorf("%v left: margin %v, want within [%v, %v]", left, got, lo, hi)
		}
	}
}
