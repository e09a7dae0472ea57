package inbox

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/journal"
)

// Journal folds the door's journal into the store before a pass places
// deliveries. The door (a lean process with no database) appends each
// verified delivery to the journal and answers GitHub; the fold stores
// them as deliveries to be placed, and this instance's place in the
// journal with them, in one transaction, so a crash anywhere repeats
// nothing and loses nothing.
type Journal struct {
	Dir   string
	Store FoldStore
	Log   zerolog.Logger
}

// FoldStore is what the fold needs of the store.
type FoldStore interface {
	FoldJournal(ctx context.Context, recs []journal.Record, next journal.Pos) (store.FoldCounts, error)
	JournalPos(ctx context.Context) (journal.Pos, error)
}

// foldBatch bounds the records one fold transaction stores.
const foldBatch = 256

// Fold stores what the door journaled since the last fold, a batch at a
// time until the journal has nothing more, trims the segments it is done
// with and returns how many records it folded.
func (j Journal) Fold(ctx context.Context) (int, error) {
	pos, err := j.Store.JournalPos(ctx)
	if err != nil {
		return 0, err
	}
	skipped := func(s journal.Skipped) {
		j.Log.Warn().Str("file", s.File).Int64("offset", s.Offset).Int64("bytes", s.Bytes).
			Msg("skipped a torn tail of the ack journal: the door stopped mid-append and never answered it; GitHub shows the delivery failed and can redeliver it")
	}
	folded := 0
	for ctx.Err() == nil {
		recs, next, err := journal.ReadSkipping(j.Dir, pos, foldBatch, skipped)
		if err != nil {
			return folded, err
		}
		if len(recs) == 0 && next == pos {
			return folded, nil
		}
		recs = j.storable(recs)
		c, err := j.Store.FoldJournal(ctx, recs, next)
		if err != nil {
			return folded, err
		}
		folded += len(recs)
		pos = next
		if c.Again+c.Duplicate > 0 {
			j.Log.Debug().Int("new", c.New).Int("again", c.Again).Int("duplicate", c.Duplicate).Msg("folded the ack journal")
		}
		// A segment left behind is read past, not again: the position
		// is in the store. Trimming it only frees the disk.
		if err := journal.Trim(j.Dir, next); err != nil {
			j.Log.Warn().Err(err).Msg("trim the ack journal")
		}
	}
	return folded, ctx.Err()
}

// storable drops the records no store accepts (no delivery ID), which
// would otherwise fail every fold and stop the inbox.
func (j Journal) storable(recs []journal.Record) []journal.Record {
	out := recs[:0]
	for _, r := range recs {
		if r.ID == "" {
			j.Log.Error().Str("event", r.Event).Time("received", r.At).Msg("dropped an ack journal record without a delivery ID")
			continue
		}
		out = append(out, r)
	}
	return out
}

// fold runs the journal's fold when the worker has one.
func (w *Worker) fold(ctx context.Context) error {
	if w.o.Journal == nil {
		return nil
	}
	if _, err := w.o.Journal.Fold(ctx); err != nil {
		return fmt.Errorf("fold the ack journal: %w", err)
	}
	return nil
}
