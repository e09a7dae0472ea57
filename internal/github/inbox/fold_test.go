package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/journal"
)

// foldEnv is a worker over a real SQLite store with the door's journal.
type foldEnv struct {
	ctx   context.Context
	clock *clock
	st    store.Store
	fs    *foldStore
	dir   string
	h     *handler
	w     *Worker
	log   *logBuffer
}

// logBuffer keeps what the worker's goroutines log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// foldStore counts the fold's outcomes and fails a fold when told, after
// the write (a crash before the answer) or instead of it.
type foldStore struct {
	store.Store
	counts     store.FoldCounts
	failBefore bool
	failAfter  bool
}

func (f *foldStore) FoldJournal(ctx context.Context, recs []journal.Record, next journal.Pos) (store.FoldCounts, error) {
	if f.failBefore {
		f.failBefore = false
		return store.FoldCounts{}, errors.New("database is locked")
	}
	c, err := f.Store.FoldJournal(ctx, recs, next)
	f.counts.New += c.New
	f.counts.Again += c.Again
	f.counts.Duplicate += c.Duplicate
	if err == nil && f.failAfter {
		f.failAfter = false
		return c, errors.New("connection reset after commit")
	}
	return c, err
}

func newFoldEnv(t *testing.T) *foldEnv {
	t.Helper()
	e := &foldEnv{ctx: context.Background(), clock: &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},
		dir: filepath.Join(t.TempDir(), "acks"), h: &handler{calls: map[string]int{}, fails: map[string][]error{}}, log: &logBuffer{}}
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(e.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e.st, e.fs = st, &foldStore{Store: st}
	log := zerolog.New(e.log)
	e.w = New(Options{Store: st, Handler: e.h, Now: e.clock.now, Log: log, Journal: &Journal{Dir: e.dir, Store: e.fs, Log: log}})
	return e
}

// door starts a writer, as the door does each time it starts.
func (e *foldEnv) door(t *testing.T) *journal.Writer {
	t.Helper()
	w, err := journal.Create(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func (e *foldEnv) ack(t *testing.T, w *journal.Writer, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := w.Append(journal.Record{ID: id, Event: "pull_request", Payload: []byte(`{}`), At: e.clock.now()}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *foldEnv) pass(t *testing.T) {
	t.Helper()
	if _, err := e.w.Pass(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// processedOnce checks each delivery is done and was handled once.
func (e *foldEnv) processedOnce(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		d, err := e.st.GetDelivery(e.ctx, id)
		if err != nil || d.Status != store.DeliveryDone || e.h.calls[id] != 1 {
			t.Errorf("%s: %s, %v, handled %d times; want done, handled once", id, d.Status, err, e.h.calls[id])
		}
	}
}

// The door's deliveries are processed once each, across the door's
// restarts, and the segments folded are trimmed.
func TestJournalFold(t *testing.T) {
	e := newFoldEnv(t)
	// No journal yet: a pass is a pass.
	e.pass(t)
	d1 := e.door(t)
	e.ack(t, d1, "a", "b", "c")
	e.pass(t)
	e.processedOnce(t, "a", "b", "c")
	e.ack(t, d1, "d")
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := e.door(t)
	e.ack(t, d2, "e")
	e.pass(t)
	e.processedOnce(t, "a", "b", "c", "d", "e")
	if c := e.fs.counts; c != (store.FoldCounts{New: 5}) {
		t.Errorf("fold counts = %+v; want 5 new", c)
	}
	segs, _ := filepath.Glob(filepath.Join(e.dir, "acks-*.log"))
	if len(segs) != 1 || segs[0] != d2.Path() {
		t.Errorf("segments left = %v; want only the door's current one", segs)
	}
}

// A batch of more than one fold's worth is folded in full in one pass.
func TestJournalFoldBatches(t *testing.T) {
	e := newFoldEnv(t)
	d := e.door(t)
	var ids []string
	for i := range foldBatch*2 + 3 {
		ids = append(ids, fmt.Sprintf("d-%d", i))
	}
	e.ack(t, d, ids...)
	n, err := e.w.o.Journal.Fold(e.ctx)
	if err != nil || n != len(ids) {
		t.Fatalf("fold = %d, %v; want %d", n, err, len(ids))
	}
	if n, err := e.w.o.Journal.Fold(e.ctx); err != nil || n != 0 {
		t.Fatalf("fold again = %d, %v; want 0", n, err)
	}
}

// A crash between the fold's commit and the journal's trim, or a fold
// that failed, doubles nothing and loses nothing.
func TestJournalFoldCrash(t *testing.T) {
	e := newFoldEnv(t)
	d := e.door(t)
	e.ack(t, d, "a", "b")
	// Fold by hand and "crash" before Trim: the segment stays.
	pos, err := e.st.JournalPos(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs, next, err := journal.Read(e.dir, pos, foldBatch)
	if err != nil || len(recs) != 2 {
		t.Fatalf("read = %d, %v", len(recs), err)
	}
	if _, err := e.st.FoldJournal(e.ctx, recs, next); err != nil {
		t.Fatal(err)
	}
	// The commit's answer is lost too, then a fold fails outright.
	e.ack(t, d, "c")
	e.fs.failAfter = true
	if _, err := e.w.Pass(e.ctx); err == nil {
		t.Fatal("a pass whose fold failed reported no error")
	}
	e.ack(t, d, "d")
	e.fs.failBefore = true
	if _, err := e.w.Pass(e.ctx); err == nil {
		t.Fatal("a pass whose fold failed reported no error")
	}
	e.pass(t)
	e.pass(t)
	e.processedOnce(t, "a", "b", "c", "d")
	if c := e.fs.counts; c != (store.FoldCounts{New: 2}) {
		t.Errorf("the worker's fold counts = %+v; want c and d new, nothing again", c)
	}
}

// A redelivery of a done delivery folds as a duplicate and is not
// processed again; one of a failed delivery is.
func TestJournalFoldRedelivery(t *testing.T) {
	e := newFoldEnv(t)
	e.h.fails["bad"] = []error{errors.New("parse: unexpected end of JSON input")}
	e.w.o.Policy.MaxAttempts = 1
	d := e.door(t)
	e.ack(t, d, "a", "bad")
	e.pass(t)
	if got, _ := e.st.GetDelivery(e.ctx, "bad"); got.Status != store.DeliveryFailed {
		t.Fatalf("bad = %s; want failed", got.Status)
	}
	e.ack(t, d, "a", "bad")
	e.pass(t)
	e.processedOnce(t, "a")
	if got, _ := e.st.GetDelivery(e.ctx, "bad"); got.Status != store.DeliveryDone || e.h.calls["bad"] != 2 {
		t.Errorf("bad after its redelivery: %s, handled %d times; want done, handled twice", got.Status, e.h.calls["bad"])
	}
	if c := e.fs.counts; c != (store.FoldCounts{New: 2, Again: 1, Duplicate: 1}) {
		t.Errorf("fold counts = %+v; want a duplicate and bad again", c)
	}
}

// A torn tail the door left when it died is skipped, at warn, naming the
// file; the deliveries around it are processed.
func TestJournalFoldTornTail(t *testing.T) {
	e := newFoldEnv(t)
	d1 := e.door(t)
	e.ack(t, d1, "a")
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(d1.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1, 0, 9, 9}); err != nil { // a header cut short
		t.Fatal(err)
	}
	_ = f.Close()
	d2 := e.door(t)
	e.ack(t, d2, "b")
	e.pass(t)
	e.processedOnce(t, "a", "b")
	if log := e.log.String(); !strings.Contains(log, `"level":"warn"`) || !strings.Contains(log, d1.Path()) || !strings.Contains(log, `"bytes":6`) {
		t.Errorf("log = %s; want a warning naming %s and its 6 bytes", log, d1.Path())
	}
}

// A journal that cannot be read fails each pass with an error instead of
// skipping what it cannot read; the deliveries already in the store are
// processed all the same.
func TestJournalFoldCorrupt(t *testing.T) {
	e := newFoldEnv(t)
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.AcceptDelivery(e.ctx, "stored", "pull_request", []byte(`{}`), store.DeliveryOrder{Later: true}); err != nil {
		t.Fatal(err)
	}
	garbage := append([]byte{0, 0, 0, 20, 1, 2, 3, 4}, make([]byte, 40)...)
	if err := os.WriteFile(filepath.Join(e.dir, "acks-0000000000000001.log"), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.w.Pass(e.ctx); err == nil || !strings.Contains(err.Error(), "corrupt frame at byte 0") {
			t.Fatalf("pass = %v; want the corruption", err)
		}
	}
	e.processedOnce(t, "stored")
}

// A record without a delivery ID, which no store accepts, is dropped with
// an error logged rather than failing every fold after it.
func TestJournalFoldDropsRecordWithoutID(t *testing.T) {
	e := newFoldEnv(t)
	d := e.door(t)
	e.ack(t, d, "a", "", "b")
	e.pass(t)
	e.processedOnce(t, "a", "b")
	if log := e.log.String(); !strings.Contains(log, `"level":"error"`) || !strings.Contains(log, "without a delivery ID") {
		t.Errorf("log = %s; want the dropped record at error", log)
	}
}
