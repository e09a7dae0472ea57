package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Queue notes: a queued check says where it stands ("3 ahead, about 12
// min"), updated as the queue moves.
const (
	// QueueNoteEvery is the least time between two updates of one check's
	// queue note (GitHub writes cost rate limit; nobody reads faster).
	QueueNoteEvery = time.Minute
	// QueueRangeEvery is the least time between two updates that only
	// move the range: the range is wide on purpose (it holds 9 waits in
	// 10), and a line that changes its figures every minute says less
	// than one that changes when the place does.
	QueueRangeEvery = 5 * time.Minute
	// queueTitle starts every queued check's title.
	queueTitle = "Queued"
)

// UpdateQueueNotes estimates the place of every queued job (fleet.Estimate:
// the claims replayed on recent run times, with the work that will arrive
// and overtake at the observed rates) and shows each queued check its
// job's place. A check's note is rewritten only when its text changes, at
// most once per QueueNoteEvery, and when only the wait's figures changed
// at most once per QueueRangeEvery; each rewrite is a lifecycle step whose
// GitHub write goes through the outbox.
func (s *Service) UpdateQueueNotes(ctx context.Context) error {
	entries, err := s.timing().ListQueue(ctx)
	if err != nil {
		return err
	}
	// A retest pinned to a card gone past the grace ends first (its
	// check leaves the queue).
	stopErr := s.StopPinnedOnGoneCards(ctx, entries)
	now := s.now()
	var (
		queue   []fleet.Queued
		running = map[int64]*fleet.RunningJob{}
		byCheck = map[int64]fleet.Queued{}
	)
	for _, e := range entries {
		if e.Status == jobstate.Running {
			running[e.AgentID] = &fleet.RunningJob{Tier: e.Tier, Pool: fleet.Pool(e.Labels, e.GPUUUID), Ran: now.Sub(e.StartedAt),
				Priority: e.Priority, Tag: e.VTag}
			continue
		}
		q := fleet.Queued{ID: e.ID, Tier: e.Tier, Labels: e.Labels, GPUUUID: e.GPUUUID,
			Priority: e.Priority, Tenant: e.ShareKey, Tag: e.VTag, Cost: e.VCost, Ages: !e.AgeAt.IsZero(), AgesIn: e.AgeAt.Sub(now)}
		queue = append(queue, q)
		if _, seen := byCheck[e.CheckRunID]; !seen && e.CheckRunID != 0 {
			byCheck[e.CheckRunID] = q // its first job in claim order
		}
	}
	if len(byCheck) == 0 {
		return stopErr
	}
	recent, err := s.timing().ListAttempts(ctx, store.AttemptFilter{Succeeded: true, Limit: 1000})
	if err != nil {
		return err
	}
	samples := make([]fleet.Sample, 0, len(recent))
	for _, a := range recent {
		samples = append(samples, fleet.Sample{Tier: a.Tier, Pool: a.Pool, Took: a.EndedAt.Sub(a.StartedAt)})
	}
	dur := fleet.NewDurations(samples)
	arrived, err := s.timing().Arrivals(ctx, now.Add(-fleet.MixWindow), now.Add(-fleet.ArrivalWindow))
	if err != nil {
		return err
	}
	agents, err := s.timing().ListAgents(ctx)
	if err != nil {
		return err
	}
	runners := make([]fleet.Runner, 0, len(agents))
	for _, a := range agents {
		runners = append(runners, fleet.Runner{Name: a.Name, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Job: running[a.ID],
			Available: !a.Drained && now.Sub(a.LastSeenAt) <= fleet.OnlineWindow})
	}
	places := fleet.Estimate(fleet.Forecast{Queue: queue, Runners: runners, Durations: dur, Arrivals: fleet.Streams(arrived)})
	open, err := s.timing().ListOpenCheckRuns(ctx)
	if err != nil {
		return err
	}
	errs := []error{stopErr}
	for _, cr := range open {
		q, ok := byCheck[cr.ID]
		if !ok || cr.State != store.CheckQueued {
			continue
		}
		title := queueTitle + ": " + places[q.ID].Note(q)
		if cr.Desired != nil && cr.Desired.Title == title {
			continue // nothing new to say
		}
		if cr.Desired != nil && strings.HasPrefix(cr.Desired.Title, queueTitle+": ") {
			since := now.Sub(cr.UpdatedAt)
			if since < QueueNoteEvery || since < QueueRangeEvery && !materialNote(cr.Desired.Title, title) {
				continue // said recently; say it at a later pass
			}
		}
		summary := queueSummary(cr, q, places[q.ID], dur)
		_, _, err := s.apply(ctx, cr, step{ev: checkstate.Event{Kind: checkstate.QueueMoved},
			out: check.Output{Title: title, Summary: summary}})
		if err != nil && !errors.Is(err, errIgnored) {
			errs = append(errs, fmt.Errorf("queue note of check %d: %w", cr.ID, err))
		}
		// Not applied: the row moved meanwhile (claimed, superseded);
		// the next pass sees it as it is.
	}
	return errors.Join(errs...)
}

// materialNote reports whether a queue note's new title says something
// the old one did not: another place in line, or a runner found or lost
// (not only other figures for the wait).
func materialNote(old, new string) bool {
	place := func(t string) string {
		p, rest, _ := strings.Cut(t, ", ")
		return p + "\x00" + strconv.FormatBool(strings.HasPrefix(rest, "waiting for"))
	}
	return place(old) != place(new)
}

// queueSummary explains a queued check's note.
func queueSummary(cr store.CheckRun, q fleet.Queued, p fleet.Place, dur fleet.Durations) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Waiting for a runner to benchmark `%s` (%s tier).", rev.Short(cr.HeadSHA), cr.Tier)
	pool := "any runner"
	switch {
	case q.GPUUUID != "":
		pool = "card `" + q.GPUUUID + "`"
	case len(q.Labels) > 0:
		pool = "runners labelled `" + strings.Join(q.Labels, "`, `") + "`"
	}
	jobs := "jobs are"
	if p.Ahead == 1 {
		jobs = "job is"
	}
	fmt.Fprintf(&b, " %d %s ahead of it for %s", p.Ahead, jobs, pool)
	if p.NoRunner {
		b.WriteString(", and no runner that can take it is online and undrained right now: it starts when one is.")
	} else {
		fmt.Fprintf(&b, "; at recent run times (%s tier: about %s a job on average), and with the work that usually arrives meanwhile and goes first, a runner should start it in about %s (in 9 of 10 replays between %s and %s).",
			q.Tier, fleet.Minutes(dur.Of(q.Tier, q.Pool())), fleet.Minutes(p.Wait), fleet.Minutes(p.Low), fleet.Minutes(p.High))
	}
	b.WriteString("\n\nMerge-queue and merge-tier jobs go first, then quick screens, then nightly and bisect work; within each, repositories share the runners by weight. This note follows the queue, at most once a minute.")
	return b.String()
}

// RunQueueNotes calls UpdateQueueNotes every interval until ctx ends.
func (s *Service) RunQueueNotes(ctx context.Context, every time.Duration) {
	s.every(ctx, every, "update queue notes", func(ctx context.Context) error {
		_, err := s.QueueNotesTurn(ctx, s.now(), every)
		return err
	})
}
