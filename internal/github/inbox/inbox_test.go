package inbox

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/store"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// handler fails each delivery as scripted, then succeeds.
type handler struct {
	mu    sync.Mutex
	fails map[string][]error
	calls map[string]int
}

func (h *handler) Process(ctx context.Context, event, id string, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[id]++
	if id == "poison" {
		panic("nil map")
	}
	if errs := h.fails[id]; len(errs) > 0 {
		h.fails[id] = errs[1:]
		return errs[0]
	}
	return nil
}

// Deliveries are done when their handler succeeds; a transient failure is
// retried after its backoff, a permanent one (or a panic) fails at once,
// and attempts are bounded.
func TestWorker(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	transient := errors.New("GET /pulls/17: 502 Bad Gateway")
	h := &handler{calls: map[string]int{}, fails: map[string][]error{
		"flaky":    {transient, transient},
		"bad":      {backoff.Permanent(errors.New("parse pull_request event: unexpected end of JSON input"))},
		"hopeless": {transient, transient, transient, transient, transient},
	}}
	w := New(Options{Store: st, Handler: h, Now: c.now, Log: zerolog.Nop(), Policy: backoff.Policy{Base: time.Second, Max: 4 * time.Second, MaxAttempts: 3}})
	for _, id := range []string{"ok", "flaky", "bad", "hopeless", "poison"} {
		if _, err := st.AcceptDelivery(ctx, id, "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if _, err := w.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		c.add(5 * time.Second)
	}
	want := map[string]store.DeliveryStatus{"ok": store.DeliveryDone, "flaky": store.DeliveryDone, "bad": store.DeliveryFailed,
		"hopeless": store.DeliveryFailed, "poison": store.DeliveryFailed}
	calls := map[string]int{"ok": 1, "flaky": 3, "bad": 1, "hopeless": 3, "poison": 1}
	for id, status := range want {
		d, err := st.GetDelivery(ctx, id)
		if err != nil || d.Status != status {
			t.Errorf("%s: %+v %v, want %s", id, d.Status, err, status)
		}
		if h.calls[id] != calls[id] {
			t.Errorf("%s: handled %d times, want %d", id, h.calls[id], calls[id])
		}
	}
	if d, _ := st.GetDelivery(ctx, "poison"); d.LastError == "" {
		t.Error("a panicking handler left no reason")
	}
}
