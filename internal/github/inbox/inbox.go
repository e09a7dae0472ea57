// Package inbox processes the webhook deliveries the app stored before
// answering GitHub. A delivery is done only when its handler succeeds; a
// handler that fails on GitHub's weather (5xx, rate limits, a lost
// connection) is tried again with backoff — minutes if GitHub asks — and
// one that fails for good is marked failed, where GitHub's "Redeliver"
// revives it. A server that stops mid-processing loses nothing: the
// unfinished rows are claimed again when their lease lapses, by it after a
// restart or by another replica.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/store"
)

// Store is what the worker needs of the store.
type Store interface {
	PlaceDeliveries(ctx context.Context, limit int, place func(event string, payload []byte) store.DeliveryOrder) (int, error)
	ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]store.Delivery, error)
	CompleteDelivery(ctx context.Context, id, leaseID string) error
	RetryDelivery(ctx context.Context, id, leaseID string, at time.Time, reason string) error
	FailDelivery(ctx context.Context, id, leaseID, reason string) error
}

// Handler processes one delivery (the app's event handlers). It must be
// safe to run again after a failure: perfgate's handlers key what they
// write by the delivery ID.
type Handler interface {
	Process(ctx context.Context, event, deliveryID string, payload []byte) error
}

// Options configure a Worker.
type Options struct {
	Store   Store
	Handler Handler
	// Journal, when set, is folded into the store at the start of each
	// pass: the deliveries the door answered without a database.
	Journal *Journal
	// Policy spaces the attempts of a failing delivery. The default gives
	// up after 15 attempts (about an hour and a half with the 10-minute
	// cap); a failed delivery is processed again on redelivery.
	Policy backoff.Policy
	// Workers handle deliveries in parallel (default 8).
	Workers int
	// Lease must outlast a handler's own deadline (default 3 minutes).
	Lease time.Duration
	// Poll is how often an idle worker looks for due rows (default 1 s).
	Poll time.Duration
	Now  func() time.Time
	Log  zerolog.Logger
}

// placeBatch bounds the deliveries one pass places: a backlog of
// thousands is placed a batch per pass, each batch one short write.
const placeBatch = 256

// Worker claims and processes inbox rows.
type Worker struct {
	o    Options
	wake chan struct{}
}

// New builds a Worker.
func New(o Options) *Worker {
	if o.Policy.Base <= 0 {
		o.Policy = backoff.Default()
		o.Policy.MaxAttempts = 15
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Lease <= 0 {
		o.Lease = 3 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Worker{o: o, wake: make(chan struct{}, 1)}
}

// Wake makes an idle worker look for work now (a delivery was stored).
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run processes deliveries until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTicker(w.o.Poll)
	defer t.Stop()
	for {
		for {
			n, err := w.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				w.o.Log.Error().Err(err).Msg("inbox pass")
			}
			if n == 0 || err != nil || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// Pass folds the door's journal into the store (Options.Journal), places
// the deliveries stored since the last pass among their pull requests'
// (Order, kept off the webhook's answer), claims a batch of due ones,
// processes them and returns how many it handled.
func (w *Worker) Pass(ctx context.Context) (int, error) {
	// A journal the fold cannot read holds up only what is in it: the
	// deliveries already stored are processed, and the pass returns the
	// fold's error after them.
	ferr := w.fold(ctx)
	if _, err := w.o.Store.PlaceDeliveries(ctx, placeBatch, Order); err != nil {
		return 0, errors.Join(ferr, fmt.Errorf("place deliveries: %w", err))
	}
	ds, err := w.o.Store.ClaimDeliveries(ctx, w.o.Workers*2, w.o.Lease)
	if err != nil {
		return 0, errors.Join(ferr, fmt.Errorf("claim deliveries: %w", err))
	}
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, w.o.Workers)
	)
	for _, d := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w.process(ctx, d)
		}()
	}
	wg.Wait()
	return len(ds), ferr
}

func (w *Worker) process(ctx context.Context, d store.Delivery) {
	log := w.o.Log.With().Str("event", d.Event).Str("delivery", d.ID).Int("attempt", d.Attempts).Logger()
	hctx, cancel := context.WithTimeout(log.WithContext(ctx), w.o.Lease)
	err := w.handle(hctx, d)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: the row stays pending and is claimed again
	}
	if err == nil {
		if cerr := w.o.Store.CompleteDelivery(ctx, d.ID, d.LeaseID); cerr != nil {
			log.Warn().Err(cerr).Msg("record a processed delivery")
			return
		}
		log.Debug().Msg("delivery processed")
		return
	}
	dec := w.o.Policy.Next(w.o.Now(), d.Attempts, err)
	if dec.GiveUp {
		log.Error().Err(err).Msg("delivery failed; it is processed again if GitHub redelivers it")
		if ferr := w.o.Store.FailDelivery(ctx, d.ID, d.LeaseID, err.Error()); ferr != nil {
			log.Warn().Err(ferr).Msg("record a failed delivery")
		}
		return
	}
	lvl := log.Info()
	if d.Attempts >= 3 {
		lvl = log.Warn()
	}
	lvl.Err(err).Time("retry_at", dec.At).Msg("delivery failed; will retry")
	if rerr := w.o.Store.RetryDelivery(ctx, d.ID, d.LeaseID, dec.At, err.Error()); rerr != nil {
		log.Warn().Err(rerr).Msg("reschedule a delivery")
	}
}

// handle runs the handler, turning a panic into a permanent failure so one
// poisonous payload cannot take the worker down or loop forever.
func (w *Worker) handle(ctx context.Context, d store.Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = backoff.Permanent(fmt.Errorf("handler panicked on %s delivery %s: %v", d.Event, d.ID, r))
		}
	}()
	return w.o.Handler.Process(ctx, d.Event, d.ID, d.Payload)
}
