// Package checkstate is the life of one perfgate check run — one tier on
// one commit — as a pure function: Transition(state, event) returns the
// new state and the effects it calls for (write the check to GitHub, warn
// the author, cancel jobs, audit), and performs none of them. The
// dispatcher applies the state and effects in one store transaction and
// the outbox carries the GitHub writes out, retrying until GitHub confirms.
//
// The rules are rows of one table (rules.go), tried in order; the first
// whose event and guard match decides. A new rule is a new row.
package checkstate

import (
	"errors"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/check"
)

// State is what the lifecycle remembers of a check run.
type State struct {
	Phase check.Phase
	// Deadline is the escalation clock of the commit's regression (zero:
	// none). It belongs to the commit: a re-run keeps it.
	Deadline time.Time
	// Held is Escalated or Accepted when an earlier run of this commit
	// reached it: a re-run that confirms the regression keeps it rather
	// than starting a fresh warning.
	Held check.Phase
}

// Kind names an event.
type Kind string

// Events.
const (
	// Requested: a new run of the commit (first run, retest, appeal,
	// approval, reopened PR). The check reports to a new GitHub run; the
	// jobs of a run still open are cancelled with it.
	Requested Kind = "requested"
	// Concluded: a verdict without a run (Event.Phase: skipped, waiting,
	// config error, not configured, errored).
	Concluded Kind = "concluded"
	// Started: a runner claimed one of the jobs.
	Started Kind = "started"
	// Progressed: still running, with news (adding runs, measuring the
	// base commit).
	Progressed Kind = "progressed"
	// QueueMoved: a queued check's place in the queue or its expected
	// wait changed; GitHub shows the new estimate. It is the only event a
	// queued check takes without moving.
	QueueMoved Kind = "queue_moved"
	// GatePass, GateRegression and GateUndecided are the gate's verdict on
	// the finished jobs.
	GatePass       Kind = "gate_pass"
	GateRegression Kind = "gate_regression"
	GateUndecided  Kind = "gate_undecided"
	// Broken: the jobs ended with nothing to compare (Event.RunnerFault
	// says whether only the runner failed).
	Broken Kind = "broken"
	// DeadlinePassed: the escalation deadline is at or before now.
	DeadlinePassed Kind = "deadline_passed"
	// AppealAccepted: a maintainer accepted the commit's regression.
	AppealAccepted Kind = "appeal_accepted"
	// Acked: a maintainer acknowledged an inconclusive check the tier
	// held (`/perf ack`): it passes as inconclusive.
	Acked Kind = "acked"
	// NewerPush: the pull request moved on to another commit.
	NewerPush Kind = "newer_push"
	// PRClosed: the pull request was closed.
	PRClosed Kind = "pr_closed"
	// CardGone: the card the check's jobs are pinned to (a retest
	// re-measures on the card of the first run) has been gone past the
	// grace: the jobs are cancelled and the check ends where the run
	// before it left the commit.
	CardGone Kind = "card_gone"
)

// Event is something that happened to a check run.
type Event struct {
	Kind Kind
	Now  time.Time
	// EscalateAfter is the grace period a fresh regression gets (Regressed).
	EscalateAfter time.Duration
	// AcceptedOnAppeal: an appeal of this commit was accepted while the
	// run measured it (Regressed).
	AcceptedOnAppeal bool
	// RunnerFault: only the runner failed (agents lost), not the commit
	// (Broken).
	RunnerFault bool
	// Phase is the verdict of a Concluded event.
	Phase check.Phase
	// Tier is the check's tier, for rules that depend on it.
	Tier string
	// NeedsAck: the tier does not pass an inconclusive verdict
	// (GateUndecided under `inconclusive: needs_ack`).
	NeedsAck bool
}

// EffectKind names an effect.
type EffectKind string

// Effects.
const (
	// SyncCheck: GitHub must show the new phase.
	SyncCheck EffectKind = "sync_check"
	// NewCheck: report to a new GitHub check run (the old one, if still
	// open on GitHub, is concluded as replaced).
	NewCheck EffectKind = "new_check"
	// CancelJobs: the check's queued jobs are cancelled, running ones told
	// to stop.
	CancelJobs EffectKind = "cancel_jobs"
	// WarnAuthor: the one comment that tells the author of the regression
	// and its deadline.
	WarnAuthor EffectKind = "warn_author"
	// AnnounceEscalation: the comment that says the regression now blocks.
	AnnounceEscalation EffectKind = "announce_escalation"
	// Audit: an audit log entry (Effect.Action).
	Audit EffectKind = "audit"
)

// Effect is one thing a transition asks for.
type Effect struct {
	Kind   EffectKind
	Action string // Audit
}

// ErrIgnored is returned for an event that does not apply in the state
// (a late job result on a superseded check, a second escalation): the
// caller does nothing.
var ErrIgnored = errors.New("checkstate: event does not apply in this state")

// Transition is the lifecycle: the first rule matching the event and state
// decides the new state and its effects.
func Transition(s State, e Event) (State, []Effect, error) {
	for _, r := range rules {
		if r.on != e.Kind || !r.from(s.Phase) || (r.when != nil && !r.when(s, e)) {
			continue
		}
		next, effects := r.to(s, e)
		return next, effects, nil
	}
	return s, nil, ErrIgnored
}
