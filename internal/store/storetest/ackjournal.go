package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/journal"
)

// Folding the door's journal stores its records as deliveries to be
// placed later, received when the door received them, and moves the
// instance's journal position in the same transaction: a batch with a bad
// record leaves neither its rows nor the position.
func testJournalFold(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	at := e.clock.Now().Add(-3 * time.Second).Add(417 * time.Microsecond)
	rec := func(id string) journal.Record {
		return journal.Record{ID: id, Event: "pull_request", Payload: []byte(`{"id":"` + id + `"}`), At: at}
	}
	if p, err := e.st.JournalPos(e.ctx); err != nil || p != (journal.Pos{}) {
		t.Fatalf("position before any fold = %+v, %v; want zero", p, err)
	}
	first := journal.Pos{Segment: 1, Offset: 180}
	if c, err := e.st.FoldJournal(e.ctx, []journal.Record{rec("a"), rec("b")}, first); err != nil || c != (store.FoldCounts{New: 2}) {
		t.Fatalf("fold a, b = %+v, %v; want 2 new", c, err)
	}
	if p, err := e.st.JournalPos(e.ctx); err != nil || p != first {
		t.Fatalf("position = %+v, %v; want %+v", p, err, first)
	}
	d, err := e.st.GetDelivery(e.ctx, "a")
	if err != nil || d.Status != store.DeliveryPending || !d.ReceivedAt.Equal(at) || !d.OrderAt.IsZero() || string(d.Payload) != `{"id":"a"}` {
		t.Fatalf("a = %+v, %v; want pending, received at %v, not placed", d, err, at)
	}
	// a is processed; then the journal holds a (redelivered), b again and c.
	if _, err := e.st.PlaceDeliveries(e.ctx, 10, func(string, []byte) store.DeliveryOrder { return store.DeliveryOrder{} }); err != nil {
		t.Fatal(err)
	}
	for _, d := range claimDeliveries(t, e, 10) {
		if d.ID == "a" {
			if err := e.st.CompleteDelivery(e.ctx, d.ID, d.LeaseID); err != nil {
				t.Fatal(err)
			}
		}
	}
	second := journal.Pos{Segment: 2, Offset: 0}
	if c, err := e.st.FoldJournal(e.ctx, []journal.Record{rec("a"), rec("b"), rec("c")}, second); err != nil ||
		c != (store.FoldCounts{New: 1, Again: 1, Duplicate: 1}) {
		t.Fatalf("fold a, b, c = %+v, %v; want 1 of each", c, err)
	}
	// A record that cannot be stored: nothing of its batch is.
	if _, err := e.st.FoldJournal(e.ctx, []journal.Record{rec("d"), rec("")}, journal.Pos{Segment: 2, Offset: 500}); err == nil {
		t.Fatal("fold with an empty delivery ID: no error")
	}
	if _, err := e.st.GetDelivery(e.ctx, "d"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("d after the failed fold: %v; want ErrNotFound", err)
	}
	if p, err := e.st.JournalPos(e.ctx); err != nil || p != second {
		t.Errorf("position after the failed fold = %+v, %v; want %+v", p, err, second)
	}
	// An empty batch still moves the position (a torn tail skipped).
	third := journal.Pos{Segment: 3, Offset: 0}
	if c, err := e.st.FoldJournal(e.ctx, nil, third); err != nil || c != (store.FoldCounts{}) {
		t.Fatalf("empty fold = %+v, %v", c, err)
	}
	if p, err := e.st.JournalPos(e.ctx); err != nil || p != third {
		t.Errorf("position after an empty fold = %+v, %v; want %+v", p, err, third)
	}
	// Each instance has a journal of its own, and a position of its own.
	other, err := store.Open(e.ctx, e.dsn, store.WithClock(e.clock.Now), store.WithInstance("host-b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	if p, err := other.JournalPos(e.ctx); err != nil || p != (journal.Pos{}) {
		t.Errorf("another instance's position = %+v, %v; want zero", p, err)
	}
	if _, err := other.FoldJournal(e.ctx, nil, journal.Pos{Segment: 7, Offset: 9}); err != nil {
		t.Fatal(err)
	}
	if p, err := e.st.JournalPos(e.ctx); err != nil || p != third {
		t.Errorf("position after another instance's fold = %+v, %v; want %+v", p, err, third)
	}
}
