package bisectjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/store"
)

// DefaultCardGrace is how long a bisect's pending job may wait for its
// pinned card while no runner offers it before the bisect is stopped. It
// is longer than a runner's restart or a short drain (an upgrade, a
// reboot), and short enough that the person who asked hears the same
// morning.
const DefaultCardGrace = 15 * time.Minute

// CardGoneError is why a bisect stopped when the card its jobs are pinned
// to went away: no registered runner offers it, or the one that does is
// drained or silent, for longer than the grace.
type CardGoneError struct {
	Card  string
	JobID int64
	SHA   string // the commit the cancelled job was to measure
	// Since is when the card was last available: the runner's drain or
	// last call-in, or — for a card no runner offers any more — when this
	// server first saw it missing.
	Since time.Time
	Why   string // "runner gpu-3 is drained", "no registered runner offers it", …
}

func (e *CardGoneError) Error() string {
	return fmt.Sprintf("card %s, which every job of this bisect ran on, has been gone since %s (%s)",
		e.Card, e.Since.UTC().Format("2006-01-02 15:04 UTC"), e.Why)
}

// CardClock keeps, in the store, since when a card no runner offers has
// been missing (store.Singletons), so every replica runs one grace.
type CardClock interface {
	CardMissingSince(ctx context.Context, card string) (time.Time, error)
	CardSeen(ctx context.Context, card string) error
}

func (r *Runner) cardGone(ctx context.Context, job store.Job, agents []store.Agent, now time.Time) (*CardGoneError, error) {
	return CardGone(ctx, r.st, job, agents, now, r.grace())
}

// CardGone says whether job's pinned card has been unavailable for longer
// than grace, and why (the bisect's rule, which retests pinned to a card
// follow too). A card counts as available while a registered,
// undrained runner that called in within the grace offers it (in its GPU
// list or its reported cards). A drained runner's card is gone only once
// the drain has lasted the grace: drains are usually brief (an upgrade),
// and a bisect stopped for one would have to start over. With no runner
// registered at all the fleet is not known and nothing is judged.
func CardGone(ctx context.Context, clock CardClock, job store.Job, agents []store.Agent, now time.Time, grace time.Duration) (*CardGoneError, error) {
	card := job.GPUUUID
	if card == "" || len(agents) == 0 {
		return nil, nil
	}
	var best *CardGoneError
	for _, a := range agents {
		if !offers(a, card) {
			continue
		}
		stale := now.Sub(a.LastSeenAt) > grace
		if !a.Drained && !stale {
			return nil, clock.CardSeen(ctx, card)
		}
		g := &CardGoneError{Card: card, JobID: job.ID, SHA: job.HeadSHA, Since: a.LastSeenAt,
			Why: fmt.Sprintf("runner %s last called in at %s", a.Name, a.LastSeenAt.UTC().Format("15:04 UTC"))}
		if a.Drained {
			g.Why = fmt.Sprintf("runner %s is drained", a.Name)
			if !a.DrainedAt.IsZero() && (!stale || a.DrainedAt.Before(g.Since)) {
				g.Since = a.DrainedAt
			}
			if stale {
				g.Why += fmt.Sprintf(" and last called in at %s", a.LastSeenAt.UTC().Format("15:04 UTC"))
			}
		}
		if best == nil || g.Since.After(best.Since) {
			best = g
		}
	}
	if best == nil {
		// When the card was first seen missing is in the store: every
		// replica's pass, and a restarted server, run the same grace.
		first, err := clock.CardMissingSince(ctx, card)
		if err != nil {
			return nil, err
		}
		best = &CardGoneError{Card: card, JobID: job.ID, SHA: job.HeadSHA, Since: first,
			Why: "no registered runner offers it"}
	} else if err := clock.CardSeen(ctx, card); err != nil {
		return nil, err
	}
	// The grace runs from when the job began waiting, too: a card gone
	// long before this job was queued (a reaped lease) still gets it.
	start := best.Since
	if job.CreatedAt.After(start) {
		start = job.CreatedAt
	}
	if now.Sub(start) <= grace {
		return nil, nil
	}
	return best, nil
}

func offers(a store.Agent, card string) bool {
	if slices.Contains(a.GPUUUIDs, card) {
		return true
	}
	for _, c := range a.Cards {
		if c.UUID == card {
			return true
		}
	}
	return false
}

func (r *Runner) grace() time.Duration {
	if r.CardGrace > 0 {
		return r.CardGrace
	}
	return DefaultCardGrace
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// stopForCard stops a bisect whose pinned card is gone: the bisect first
// (so the cancelled job's end, when the judge sees it, finds no bisect
// waiting and is ignored), with the comment saying which card and what
// was learned, then the job. It never moves the bisect to another card:
// its measurements so far would not compare with the new card's.
func (r *Runner) stopForCard(ctx context.Context, rec store.BisectRecord, gone *CardGoneError) error {
	log := zerolog.Ctx(ctx).With().Int64("bisect", rec.ID).Int64("job_id", gone.JobID).Str("gpu", gone.Card).Logger()
	err := r.failBisect(ctx, rec, gone)
	if !errors.Is(err, ErrStopped) {
		return err // not recorded (another replica moved it): the next pass looks again
	}
	log.Warn().Err(err).Time("gone_since", gone.Since).Msg("bisect stopped: its card is gone")
	if _, cerr := r.st.CancelJob(ctx, gone.JobID, fmt.Sprintf("bisect %d stopped: card %s is gone", rec.ID, gone.Card)); cerr != nil {
		// The bisect is stopped and reported; a job left queued on a
		// card that is gone claims nothing and its end is ignored.
		log.Error().Err(cerr).Msg("cancel the job of a bisect whose card is gone")
	}
	return nil
}

// cardGoneBody is the comment for a bisect stopped by CardGoneError: the
// card, since when, the range narrowed so far and how to go on.
func cardGoneBody(rec store.BisectRecord, gone *CardGoneError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### perfgate bisect stopped: %s, %.7s..%.7s\n\n", rec.Metric, rec.GoodSHA, rec.BadSHA)
	fmt.Fprintf(&b, "The bisect's next measurement (job %d, commit %.7s) is pinned to card `%s`, the card every job of this bisect ran on, "+
		"and that card has been gone since %s: %s. Job %d is cancelled.\n\n",
		gone.JobID, gone.SHA, gone.Card, gone.Since.UTC().Format("2006-01-02 15:04 UTC"), gone.Why, gone.JobID)
	b.WriteString("perfgate does not move a bisect to another card: measurements on different GPUs do not compare, " +
		"so the runs so far could not be set against the new card's.\n\n")
	s, err := bisect.Load(rec.State)
	good, bad := rec.GoodSHA, rec.BadSHA
	if err == nil && s.Lo >= 0 && s.Hi < len(s.Commits) && s.Lo < s.Hi {
		good, bad = s.Commits[s.Lo].SHA, s.Commits[s.Hi].SHA
		if s.Lo > 0 || s.Hi < len(s.Commits)-1 {
			fmt.Fprintf(&b, "**Narrowed so far:** good at %.7s, bad at %.7s — %d of the %d commits after the good end are left.\n\n",
				good, bad, s.Hi-s.Lo, len(s.Commits)-1)
		} else {
			fmt.Fprintf(&b, "**Narrowed so far:** nothing yet — the whole range %.7s..%.7s (%d commits) is left.\n\n",
				good, bad, len(s.Commits)-1)
		}
	}
	b.WriteString("**To go on**, either:\n\n")
	fmt.Fprintf(&b, "- bring the runner with card `%s` back (undrain it, restart its agent), then ask again: `/perf bisect %.7s %.7s`;\n",
		gone.Card, rec.GoodSHA, rec.BadSHA)
	if good != rec.GoodSHA || bad != rec.BadSHA {
		fmt.Fprintf(&b, "- or bisect only what is left, on any card (both ends are measured again there): `/perf bisect %.7s %.7s`.\n\n", good, bad)
	} else {
		b.WriteString("- or ask again on any card now: the bisect starts over there.\n\n")
	}
	if err == nil {
		b.WriteString(s.Markdown())
	}
	if rec.RequestedBy != "" && !strings.Contains(rec.RequestedBy, "[bot]") && rec.ChangePointID == 0 {
		fmt.Fprintf(&b, "\nBisect asked for by @%s.\n", rec.RequestedBy)
	}
	return cut(b.String())
}
