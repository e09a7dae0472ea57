package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// DeliveryStatus is a webhook delivery's state in the inbox.
type DeliveryStatus string

// Delivery states: pending until a worker's processing succeeds (done) or
// fails for good (failed). A redelivery of a failed delivery makes it
// pending again; a redelivery of a done one is a duplicate.
const (
	DeliveryPending DeliveryStatus = "pending"
	DeliveryDone    DeliveryStatus = "done"
	DeliveryFailed  DeliveryStatus = "failed"
)

// Delivery is one webhook delivery as the inbox keeps it.
type Delivery struct {
	ID      string // X-GitHub-Delivery
	Event   string // X-GitHub-Event
	Payload []byte
	Status  DeliveryStatus
	// Attempts counts claims; LeaseID is the current claim's fencing token.
	Attempts      int
	NextAttemptAt time.Time
	LeaseID       string
	LastError     string
	// Redeliveries counts deliveries of this ID after the first.
	Redeliveries int
	ReceivedAt   time.Time
	DoneAt       time.Time
	// Subject and OrderAt are the delivery's place in its subject's
	// history (see DeliveryOrder); OrderAt is zero until a delivery
	// accepted with DeliveryOrder.Later is placed.
	Subject string
	OrderAt time.Time
}

// DeliveryOrder places a delivery in its subject's history. Deliveries of
// one subject (a pull request: "owner/repo#17") are claimed one at a time,
// earliest At first (ties: earliest received, then delivery ID), and none
// is claimed while an earlier one is still pending — waiting out a retry
// included — so they are applied in the order they happened. An empty
// Subject keeps no order; a zero At is the time the delivery arrived.
//
// Later leaves the placing to the worker: the webhook's answer waits for
// nothing but the insert, and PlaceDeliveries reads the payload and
// places the delivery before it can be claimed.
type DeliveryOrder struct {
	Subject string
	At      time.Time
	Later   bool
}

// Accepted says what AcceptDelivery did with a delivery.
type Accepted int

const (
	// AcceptedNew: first sighting, stored pending.
	AcceptedNew Accepted = iota + 1
	// AcceptedAgain: a redelivery of a delivery that has not succeeded;
	// it is (again) pending and will be processed.
	AcceptedAgain
	// AcceptedDuplicate: the delivery already succeeded; nothing to do.
	AcceptedDuplicate
)

const deliveryCols = `delivery_id, event, payload, status, attempts, next_attempt_at, lease_id, last_error,
	redeliveries, received_at, done_at, subject, order_at`

func scanDelivery(sc scanner) (Delivery, error) {
	var (
		d                     Delivery
		status                string
		next, received, doneT sql.NullInt64
		orderAt               sql.NullInt64
	)
	if err := sc.Scan(&d.ID, &d.Event, &d.Payload, &status, &d.Attempts, &next, &d.LeaseID, &d.LastError,
		&d.Redeliveries, &received, &doneT, &d.Subject, &orderAt); err != nil {
		return Delivery{}, err
	}
	d.Status = DeliveryStatus(status)
	d.NextAttemptAt = fromMicros(next)
	d.ReceivedAt = fromMicros(received)
	d.DoneAt = fromMicros(doneT)
	if orderAt.Int64 != 0 { // 0: not placed yet
		d.OrderAt = fromMicros(orderAt)
	}
	return d, nil
}

// AcceptDelivery stores a verified webhook delivery, payload included, in
// the one statement that also deduplicates it, so a 2xx is only sent for a
// delivery that is durably queued. A redelivery of a delivery that never
// succeeded (pending or failed) is processed — a failed one from scratch,
// a pending one as soon as no worker holds it; one that succeeded is a
// duplicate. order places it among its subject's deliveries.
func (s *sqlStore) AcceptDelivery(ctx context.Context, id, event string, payload []byte, order DeliveryOrder) (Accepted, error) {
	now := s.nowMicros()
	return s.acceptDelivery(ctx, s.ackDB(), id, event, payload, order, now, now)
}

// acceptDelivery is AcceptDelivery's one statement, run by ex (the ack
// connection, or FoldJournal's transaction), for a delivery that arrived
// at received (microseconds) and is due at now.
func (s *sqlStore) acceptDelivery(ctx context.Context, ex execer, id, event string, payload []byte, order DeliveryOrder, received, now int64) (Accepted, error) {
	if id == "" {
		return 0, fmt.Errorf("accept delivery: empty delivery ID")
	}
	// order_at 0 marks a delivery not yet placed (Later): no placed one
	// has it, since a zero At means the time it arrived.
	orderAt := received
	switch {
	case order.Later:
		orderAt, order.Subject = 0, ""
	case !order.At.IsZero():
		orderAt = order.At.UnixMicro()
	}
	var redeliveries int
	// A redelivery to be placed later keeps the place its first delivery
	// got (the same payload gives the same place).
	err := ex.QueryRowContext(ctx, s.q(`INSERT INTO webhook_inbox
			(delivery_id, event, payload, status, next_attempt_at, received_at, subject, order_at)
		VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)
		ON CONFLICT (delivery_id) DO UPDATE SET
			event = excluded.event, payload = excluded.payload, status = 'pending',
			subject = CASE WHEN excluded.order_at = 0 THEN webhook_inbox.subject ELSE excluded.subject END,
			order_at = CASE WHEN excluded.order_at = 0 THEN webhook_inbox.order_at ELSE excluded.order_at END,
			attempts = CASE WHEN webhook_inbox.status = 'failed' THEN 0 ELSE webhook_inbox.attempts END,
			next_attempt_at = CASE WHEN webhook_inbox.next_attempt_at < excluded.next_attempt_at
				THEN webhook_inbox.next_attempt_at ELSE excluded.next_attempt_at END,
			redeliveries = webhook_inbox.redeliveries + 1
		WHERE webhook_inbox.status <> 'done'
		RETURNING redeliveries`), id, event, blob(payload), now, received, order.Subject, orderAt).Scan(&redeliveries)
	if errors.Is(err, sql.ErrNoRows) {
		return AcceptedDuplicate, nil
	}
	if err != nil {
		return 0, fmt.Errorf("accept delivery %s: %w", id, err)
	}
	if redeliveries == 0 {
		return AcceptedNew, nil
	}
	return AcceptedAgain, nil
}

// PlaceDeliveries places up to limit pending deliveries accepted with
// DeliveryOrder.Later among their subjects' deliveries, with the order
// place reads from each payload, and returns how many it placed. The
// payloads are read outside the write; placing one twice (two replicas)
// writes the same place.
func (s *sqlStore) PlaceDeliveries(ctx context.Context, limit int, place func(event string, payload []byte) DeliveryOrder) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("place deliveries: limit must be positive")
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT delivery_id, event, payload, received_at FROM webhook_inbox
		WHERE status = 'pending' AND order_at = 0 ORDER BY received_at LIMIT ?`), limit)
	if err != nil {
		return 0, fmt.Errorf("place deliveries: %w", err)
	}
	type placed struct {
		id, subject string
		at          int64
	}
	var ps []placed
	for rows.Next() {
		var (
			id, event string
			payload   []byte
			received  int64
		)
		if err := rows.Scan(&id, &event, &payload, &received); err != nil {
			rows.Close()
			return 0, fmt.Errorf("place deliveries: %w", err)
		}
		o := place(event, payload)
		at := received
		if !o.At.IsZero() {
			at = o.At.UnixMicro()
		}
		ps = append(ps, placed{id: id, subject: o.Subject, at: max(at, 1)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("place deliveries: %w", err)
	}
	if len(ps) == 0 {
		return 0, nil
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for _, p := range ps {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE webhook_inbox SET subject = ?, order_at = ?
				WHERE delivery_id = ? AND order_at = 0`), p.subject, p.at, p.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("place deliveries: %w", err)
	}
	return len(ps), nil
}

// ClaimDeliveries leases up to limit pending deliveries that are due,
// oldest first. Several workers and replicas may claim at once: each row
// goes to one of them (SKIP LOCKED on PostgreSQL, serial writes on SQLite).
// A claim whose lease lapses (its worker died) is claimed again. Of one
// subject's deliveries only the earliest pending one is claimable, and
// only while no other of them is held (see DeliveryOrder). A delivery not
// yet placed (DeliveryOrder.Later) waits for PlaceDeliveries.
func (s *sqlStore) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]Delivery, error) {
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim deliveries: limit and lease must be positive")
	}
	leaseID, err := s.serverLeaseID()
	if err != nil {
		return nil, err
	}
	now := s.now()
	rows, err := s.w.QueryContext(ctx, s.q(`UPDATE webhook_inbox SET
			lease_id = ?, lease_until = ?, attempts = attempts + 1
		WHERE delivery_id IN (SELECT w.delivery_id FROM webhook_inbox w
			WHERE w.status = 'pending' AND w.order_at <> 0 AND w.next_attempt_at <= ? AND (w.lease_until IS NULL OR w.lease_until < ?)
				AND (w.subject = '' OR NOT EXISTS (SELECT 1 FROM webhook_inbox o
					WHERE o.subject = w.subject AND o.status = 'pending' AND o.delivery_id <> w.delivery_id
						AND (o.lease_until >= ?
							OR o.order_at < w.order_at
							OR (o.order_at = w.order_at AND o.received_at < w.received_at)
							OR (o.order_at = w.order_at AND o.received_at = w.received_at AND o.delivery_id < w.delivery_id))))
			ORDER BY w.next_attempt_at, w.received_at LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+deliveryCols),
		leaseID, now.Add(lease).UnixMicro(), now.UnixMicro(), now.UnixMicro(), now.UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	// RETURNING has no order: hand them out oldest first.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextAttemptAt.Equal(out[j].NextAttemptAt) {
			return out[i].NextAttemptAt.Before(out[j].NextAttemptAt)
		}
		return out[i].ReceivedAt.Before(out[j].ReceivedAt)
	})
	return out, nil
}

// CompleteDelivery marks a claimed delivery done. It is refused with
// ErrLeaseLost when the claim lapsed and another worker holds it.
func (s *sqlStore) CompleteDelivery(ctx context.Context, id, leaseID string) error {
	return s.endDelivery(ctx, "complete", id, leaseID, `status = 'done', done_at = ?, last_error = ''`, s.nowMicros())
}

// RetryDelivery releases a claimed delivery to be tried again at at,
// recording why this attempt failed.
func (s *sqlStore) RetryDelivery(ctx context.Context, id, leaseID string, at time.Time, reason string) error {
	return s.endDelivery(ctx, "retry", id, leaseID, `next_attempt_at = ?, last_error = ?`, at.UnixMicro(), reason)
}

// FailDelivery gives up on a claimed delivery (an error retrying cannot
// fix). A redelivery makes it pending again.
func (s *sqlStore) FailDelivery(ctx context.Context, id, leaseID, reason string) error {
	return s.endDelivery(ctx, "fail", id, leaseID, `status = 'failed', last_error = ?`, reason)
}

func (s *sqlStore) endDelivery(ctx context.Context, what, id, leaseID, set string, args ...any) error {
	if leaseID == "" {
		return ErrLeaseLost
	}
	args = append(args, id, leaseID)
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE webhook_inbox SET `+set+`, lease_id = '', lease_until = NULL
		WHERE delivery_id = ? AND lease_id = ? AND status = 'pending'`), args...)
	if err != nil {
		return fmt.Errorf("%s delivery %s: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s delivery %s: %w", what, id, err)
	}
	if n != 1 {
		return fmt.Errorf("%s delivery %s: %w", what, id, ErrLeaseLost)
	}
	return nil
}

// GetDelivery returns one delivery.
func (s *sqlStore) GetDelivery(ctx context.Context, id string) (Delivery, error) {
	d, err := scanDelivery(s.r.QueryRowContext(ctx, s.q(`SELECT `+deliveryCols+` FROM webhook_inbox WHERE delivery_id = ?`), id))
	if err != nil {
		return Delivery{}, fmt.Errorf("get delivery %s: %w", id, notFound(err))
	}
	return d, nil
}

// CountDeliveries counts the inbox's deliveries by status.
func (s *sqlStore) CountDeliveries(ctx context.Context) (map[DeliveryStatus]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM webhook_inbox GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	defer rows.Close()
	out := map[DeliveryStatus]int{}
	for rows.Next() {
		var (
			st string
			n  int
		)
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count deliveries: %w", err)
		}
		out[DeliveryStatus(st)] = n
	}
	return out, rows.Err()
}
