package server

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// slowStore holds each insert until release closes.
type slowStore struct {
	store.Store
	release chan struct{}
}

func (s slowStore) AcceptDelivery(ctx context.Context, id, event string, payload []byte, order store.DeliveryOrder) (store.Accepted, error) {
	<-s.release
	return s.Store.AcceptDelivery(ctx, id, event, payload, order)
}

// The webhook's answer waits for the insert alone, and never past its
// budget: at the deadline it answers (a 503 from the receiver) while the
// insert goes on, so the delivery is stored all the same. The budget runs
// from the request's arrival. The payload is stored unplaced: the worker
// reads its order.
func TestAckAnswersByItsDeadlineAndLosesNothing(t *testing.T) {
	tests := []struct {
		name     string
		stall    bool // the insert waits until after the deadline
		before   string
		wantErr  error
		wantDup  bool
		wantLeft time.Duration // at most this much budget left when the request arrived 3 s ago
	}{
		{name: "stored in time", wantLeft: 5 * time.Second},
		{name: "insert stalls past the deadline", stall: true, wantErr: errAckDeadline, wantLeft: 5 * time.Second},
		{name: "duplicate of a processed delivery", before: "done", wantDup: true, wantLeft: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if tt.before == "done" {
				if _, err := st.AcceptDelivery(ctx, "d-1", "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil {
					t.Fatal(err)
				}
				ds, err := st.ClaimDeliveries(ctx, 1, time.Minute)
				if err != nil || len(ds) != 1 {
					t.Fatalf("claim = %v, %v", ds, err)
				}
				if err := st.CompleteDelivery(ctx, "d-1", ds[0].LeaseID); err != nil {
					t.Fatal(err)
				}
			}
			release := make(chan struct{})
			if !tt.stall {
				close(release)
			}
			deadline := make(chan time.Time)
			var budgetLeft time.Duration
			stored := make(chan error, 1)
			in := storeInbox{st: slowStore{Store: st, release: release}, budget: ackBudget,
				after: func(d time.Duration) <-chan time.Time {
					budgetLeft = d
					if tt.stall {
						close(deadline) // the test's clock: the deadline passes now
					}
					return deadline
				},
				stored: func(_ string, err error) { stored <- err },
			}
			rctx := context.WithValue(ctx, arrivalKey{}, time.Now().Add(-3*time.Second))
			dup, err := in.Accept(rctx, "d-1", "pull_request", []byte(`{"action":"opened"}`))
			if !errors.Is(err, tt.wantErr) || dup != tt.wantDup {
				t.Fatalf("Accept = %v, %v; want %v, %v", dup, err, tt.wantDup, tt.wantErr)
			}
			if budgetLeft > tt.wantLeft || budgetLeft <= 0 {
				t.Errorf("deadline in %v; want at most %v (8 s from an arrival 3 s ago)", budgetLeft, tt.wantLeft)
			}
			close(releaseOnce(release, tt.stall))
			if err := <-stored; err != nil {
				t.Fatalf("insert: %v", err)
			}
			d, err := st.GetDelivery(ctx, "d-1")
			if err != nil {
				t.Fatalf("the delivery was lost: %v", err)
			}
			if tt.before == "" && (d.Status != store.DeliveryPending || !d.OrderAt.IsZero() || d.Subject != "") {
				t.Errorf("stored %s, subject %q, order %v; want pending and unplaced", d.Status, d.Subject, d.OrderAt)
			}
		})
	}
}

// releaseOnce returns release to close when the insert still waits on it,
// else a fresh channel (closing release twice would panic).
func releaseOnce(release chan struct{}, waiting bool) chan struct{} {
	if waiting {
		return release
	}
	return make(chan struct{})
}
