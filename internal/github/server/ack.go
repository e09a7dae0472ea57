package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
)

// The webhook's answer. GitHub waits 10 s for it and then marks the
// delivery failed (an app's deliveries are not retried), so the answer
// waits for as little as possible: the signature check (the app's
// receiver) and one insert of the raw body. Where the delivery stands in
// its pull request's history is read from the payload by the inbox's
// worker (inbox.Order through store.PlaceDeliveries), not here.
//
// Should the insert still be waiting ackBudget after the request arrived
// (a database stalled, a host starved of CPU), the answer is a 503 then,
// inside GitHub's 10 s, and the insert goes on: the delivery is stored
// and processed all the same, and a redelivery of it is a duplicate.

// ackBudget is the most a webhook's answer takes from its arrival: GitHub
// gives up at 10 s, measured on its side of the network.
const ackBudget = 8 * time.Second

// insertLimit bounds an insert that outlives its answer.
const insertLimit = 2 * time.Minute

// errAckDeadline is Accept's answer when the insert outlasts ackBudget.
var errAckDeadline = errors.New("the delivery is still being stored: answering before GitHub gives up; it is stored and processed when the insert completes")

// storeInbox is the app's Inbox over the store.
type storeInbox struct {
	st     store.Store
	budget time.Duration
	// after is time.After, a test's clock in tests.
	after func(time.Duration) <-chan time.Time
	// stored, when set, hears each insert's end (tests).
	stored func(id string, err error)
}

func newStoreInbox(st store.Store) storeInbox {
	return storeInbox{st: st, budget: ackBudget, after: time.After}
}

// Accept stores a verified delivery, to be placed and processed by the
// inbox's worker.
func (i storeInbox) Accept(ctx context.Context, id, event string, payload []byte) (bool, error) {
	arrived := arrivedAt(ctx)
	type result struct {
		a   store.Accepted
		err error
	}
	done := make(chan result, 1)
	// The insert does not end with the request: answered or not, the
	// delivery is stored.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertLimit)
	go func() {
		defer cancel()
		a, err := i.st.AcceptDelivery(ictx, id, event, payload, store.DeliveryOrder{Later: true})
		if err != nil {
			err = fmt.Errorf("store delivery %s: %w", id, err)
		}
		if i.stored != nil {
			i.stored(id, err)
		}
		done <- result{a, err}
	}()
	select {
	case r := <-done:
		return r.a == store.AcceptedDuplicate, r.err
	case <-i.after(time.Until(arrived.Add(i.budget))):
		log := zerolog.Ctx(ctx)
		log.Warn().Dur("budget", i.budget).Msg("webhook answer at its deadline: 503 now, the delivery is stored when its insert completes")
		go func() {
			if r := <-done; r.err != nil {
				log.Error().Err(r.err).Msg("delivery answered 503 at the deadline and then not stored: redeliver it (perfgate deliveries)")
			} else {
				log.Info().Msg("delivery answered 503 at the deadline is stored; it is processed")
			}
		}()
		return false, errAckDeadline
	}
}

// arrivalKey marks a webhook request's context with the time it arrived,
// the start of its answer's budget.
type arrivalKey struct{}

// arrivedAt is when the webhook request of ctx arrived (the intake marks
// it), or now.
func arrivedAt(ctx context.Context) time.Time {
	if at, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return at
	}
	return time.Now()
}
