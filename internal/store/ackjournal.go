package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/store/journal"
)

// FoldCounts says what FoldJournal did with a batch, by AcceptDelivery's
// outcomes.
type FoldCounts struct{ New, Again, Duplicate int }

// FoldJournal stores journal records as AcceptDelivery(…,
// DeliveryOrder{Later: true}) would, received at the record's At, and
// records next as this instance's journal position, in one transaction: a
// crash between two folds repeats nothing and loses nothing.
func (s *sqlStore) FoldJournal(ctx context.Context, recs []journal.Record, next journal.Pos) (FoldCounts, error) {
	var c FoldCounts
	err := s.tx(ctx, func(tx *sql.Tx) error {
		c = FoldCounts{}
		now := s.nowMicros()
		for _, r := range recs {
			received := now
			if !r.At.IsZero() {
				received = r.At.UnixMicro()
			}
			a, err := s.acceptDelivery(ctx, tx, r.ID, r.Event, r.Payload, DeliveryOrder{Later: true}, received, now)
			if err != nil {
				return err
			}
			switch a {
			case AcceptedNew:
				c.New++
			case AcceptedAgain:
				c.Again++
			case AcceptedDuplicate:
				c.Duplicate++
			}
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO ack_journal (instance, segment, byte_offset) VALUES (?, ?, ?)
			ON CONFLICT (instance) DO UPDATE SET segment = excluded.segment, byte_offset = excluded.byte_offset`),
			s.instance, next.Segment, next.Offset)
		return err
	})
	if err != nil {
		return FoldCounts{}, fmt.Errorf("fold journal to %d:%d: %w", next.Segment, next.Offset, err)
	}
	return c, nil
}

// JournalPos is this instance's journal position: where its next fold
// reads from (the zero Pos before the first).
func (s *sqlStore) JournalPos(ctx context.Context) (journal.Pos, error) {
	var p journal.Pos
	err := s.r.QueryRowContext(ctx, s.q(`SELECT segment, byte_offset FROM ack_journal WHERE instance = ?`), s.instance).
		Scan(&p.Segment, &p.Offset)
	if errors.Is(err, sql.ErrNoRows) {
		return journal.Pos{}, nil
	}
	if err != nil {
		return journal.Pos{}, fmt.Errorf("journal position: %w", err)
	}
	return p, nil
}
