package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Retests re-measure on the card of the first run (cardOf), so their jobs
// are pinned to it. A card that goes away — no registered runner offers
// it, or the one that does is drained or silent — would hold them queued
// forever. They get the bisect's grace and message (bisectjob.CardGone):
// past the grace the check's jobs are cancelled, the PR is told which
// card, since when and the ways on, and the check ends (checkstate
// CardGone: a held regression stands, a warning keeps its clock, anything
// else is inconclusive).

func (s *Service) grace() time.Duration {
	if s.cardGrace > 0 {
		return s.cardGrace
	}
	return bisectjob.DefaultCardGrace
}

// StopPinnedOnGoneCards ends every open check whose queued job is pinned
// to a card gone for longer than the grace. It runs in the queue-notes
// turn (once per period across replicas); the card's "missing since" is
// in the store, so every replica counts the same grace.
func (s *Service) StopPinnedOnGoneCards(ctx context.Context, queue []store.QueueEntry) error {
	var agents []store.Agent
	var errs []error
	seen := map[int64]bool{}
	for _, e := range queue {
		if e.Status != jobstate.Queued || e.GPUUUID == "" || e.CheckRunID == 0 || seen[e.CheckRunID] {
			continue
		}
		if agents == nil {
			var err error
			if agents, err = s.timing().ListAgents(ctx); err != nil {
				return err
			}
		}
		job, err := s.timing().GetJob(ctx, e.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gone, err := bisectjob.CardGone(ctx, s.timing(), job, agents, s.now(), s.grace())
		if err != nil || gone == nil {
			errs = append(errs, err)
			continue
		}
		seen[e.CheckRunID] = true
		if err := s.stopForCard(ctx, e.CheckRunID, gone); err != nil {
			errs = append(errs, fmt.Errorf("check run %d, card %s gone: %w", e.CheckRunID, gone.Card, err))
		}
	}
	return errors.Join(errs...)
}

// stopForCard ends check run id because its pinned card is gone.
func (s *Service) stopForCard(ctx context.Context, id int64, gone *bisectjob.CardGoneError) error {
	cr, err := s.lifecycle().GetCheckRunByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st := step{
		ev:           checkstate.Event{Kind: checkstate.CardGone},
		cancelReason: fmt.Sprintf("card %s is gone", gone.Card),
		comment:      cardGoneComment(cr, s.docOf(cr).Held, gone),
		commentKey:   fmt.Sprintf("cardgone:%d:%d", cr.ID, cr.Generation),
		detail:       map[string]any{"gpu": gone.Card, "gone_since": gone.Since, "why": gone.Why, "job_id": gone.JobID},
	}
	if cr.Deadline.IsZero() && s.docOf(cr).Held == "" {
		// Nothing held: the check says why it ends (a held regression
		// shows its verdict again).
		st.out.Title = "Retest stopped: card " + gone.Card + " is gone"
		st.out.Summary = cardGoneSummary(gone)
	}
	_, _, err = s.apply(ctx, cr, st)
	if errors.Is(err, errIgnored) {
		return nil // concluded meanwhile
	}
	return err
}

func cardGoneSummary(gone *bisectjob.CardGoneError) string {
	return fmt.Sprintf("Job %d re-measures commit `%.7s` on card `%s`, the card of the run it retests, and that card has been gone since %s (%s). "+
		"The job is cancelled: runs on another GPU would not compare with the first.",
		gone.JobID, gone.SHA, gone.Card, gone.Since.UTC().Format("2006-01-02 15:04 UTC"), gone.Why)
}

// cardGoneComment tells the PR: the card, since when, and the ways on.
func cardGoneComment(cr store.CheckRun, held string, gone *bisectjob.CardGoneError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### perfgate retest stopped: %s tier, %.7s\n\n", cr.Tier, cr.HeadSHA)
	b.WriteString(cardGoneSummary(gone))
	b.WriteString("\n\n")
	switch {
	case !cr.Deadline.IsZero():
		fmt.Fprintf(&b, "The regression found before stands, and so does its deadline (%s).\n\n", cr.Deadline.UTC().Format("2006-01-02 15:04 UTC"))
	case held != "":
		b.WriteString("The verdict before the retest stands.\n\n")
	default:
		b.WriteString("The check ends inconclusive: the runner failed, not the commit.\n\n")
	}
	b.WriteString("**To go on**, either:\n\n")
	fmt.Fprintf(&b, "- bring the runner with card `%s` back (undrain it, restart its agent), then comment `/perf retest %s`;\n", gone.Card, cr.Tier)
	b.WriteString("- or push a new commit: its checks measure on any card.\n")
	return b.String()
}
