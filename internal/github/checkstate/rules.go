package checkstate

import (
	"time"

	"github.com/perfgate/perfgate/internal/vocab/check"
)

// rule is one row of the lifecycle: on event on, from a phase from accepts,
// when the guard (if any) holds, the state becomes what to returns.
type rule struct {
	on   Kind
	from func(check.Phase) bool
	when func(State, Event) bool
	to   func(State, Event) (State, []Effect)
}

// Phase sets for the from column.
func anyPhase(check.Phase) bool    { return true }
func isOpen(p check.Phase) bool    { return p.Open() }
func queued(p check.Phase) bool    { return p == check.Queued }
func settled(p check.Phase) bool   { return p != check.None && !p.Open() }
func regressed(p check.Phase) bool { return p == check.Warned || p == check.Escalated }
func is(want check.Phase) func(check.Phase) bool {
	return func(p check.Phase) bool { return p == want }
}

// Guards.
func hasClock(s State, _ Event) bool      { return !s.Deadline.IsZero() }
func heldEscalated(s State, _ Event) bool { return s.Held == check.Escalated }
func heldAccepted(s State, e Event) bool  { return s.Held == check.Accepted || e.AcceptedOnAppeal }

func sync(more ...Effect) []Effect { return append([]Effect{{Kind: SyncCheck}}, more...) }
func audit(action string) Effect   { return Effect{Kind: Audit, Action: action} }

// rules is the lifecycle, in priority order. To add a rule (a budget
// that runs out, say), add a
// phase if it needs one, give Phase.Check its GitHub face, and put a row
// here above the general row it refines; then add its rows to the table
// in checkstate_test.go.
var rules = []rule{
	// A new run of the commit: a fresh GitHub check run, the commit's clock
	// kept, an escalated or accepted regression held for the new verdict.
	// The run it replaces is still open: its jobs are stopped with the
	// replacement, or a whole tier of GPU time goes to a result nobody
	// reads.
	{on: Requested, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Queued, Deadline: s.Deadline, Held: carried(s)}, sync(Effect{Kind: NewCheck}, Effect{Kind: CancelJobs})
	}},
	{on: Requested, from: anyPhase, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Queued, Deadline: s.Deadline, Held: carried(s)}, sync(Effect{Kind: NewCheck})
	}},
	// A verdict without a run replaces whatever ran before.
	{on: Concluded, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: e.Phase}, sync(Effect{Kind: NewCheck}, Effect{Kind: CancelJobs})
	}},
	{on: Concluded, from: anyPhase, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: e.Phase}, sync(Effect{Kind: NewCheck})
	}},

	{on: Started, from: queued, to: func(s State, e Event) (State, []Effect) {
		s.Phase = check.InProgress
		return s, sync()
	}},
	{on: Progressed, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		s.Phase = check.InProgress
		return s, sync()
	}},
	// Still queued, with a new position or wait to show.
	{on: QueueMoved, from: queued, to: func(s State, e Event) (State, []Effect) {
		return s, sync()
	}},

	// The gate's verdicts, on an open check only: a late result on a
	// superseded, closed or replaced check is ignored.
	{on: GatePass, from: isOpen, when: func(s State, _ Event) bool { return !s.Deadline.IsZero() || s.Held == check.Escalated },
		to: func(s State, e Event) (State, []Effect) {
			return State{Phase: check.Passed}, sync(audit("regression.resolved"), audit("gate.pass"))
		}},
	{on: GatePass, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Passed}, sync(audit("gate.pass"))
	}},
	// Confirmed on a re-run: still blocking, or still accepted.
	{on: GateRegression, from: isOpen, when: heldEscalated, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Escalated, Held: check.Escalated}, sync(audit("gate.regression"))
	}},
	{on: GateRegression, from: isOpen, when: heldAccepted, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Accepted, Held: check.Accepted}, sync(audit("gate.regression"))
	}},
	// A regression seen again on the same commit keeps its clock (a past
	// deadline is escalated by the next escalation pass) and does not warn
	// the author twice.
	{on: GateRegression, from: isOpen, when: hasClock, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Warned, Deadline: s.Deadline}, sync(audit("gate.regression"))
	}},
	{on: GateRegression, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Warned, Deadline: e.Now.Add(e.EscalateAfter)}, sync(Effect{Kind: WarnAuthor}, audit("gate.regression"))
	}},
	// An inconclusive verdict on a tier that does not pass one holds the
	// check (action required) until a maintainer acknowledges it or more
	// runs decide.
	{on: GateUndecided, from: isOpen, when: func(_ State, e Event) bool { return e.NeedsAck }, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.NeedsAck}, sync(audit("gate.inconclusive"))
	}},
	{on: GateUndecided, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Inconclusive}, sync(audit("gate.inconclusive"))
	}},
	{on: Broken, from: isOpen, when: func(_ State, e Event) bool { return e.RunnerFault }, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Inconclusive}, sync(audit("gate.broken"))
	}},
	{on: Broken, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Errored}, sync(audit("gate.broken"))
	}},

	// A retest whose pinned card is gone ends without a verdict: a held
	// escalation or acceptance stands, a warning keeps its clock (a card
	// drained under a retest is no way around the deadline), anything
	// else is inconclusive — the runner failed, not the commit.
	{on: CardGone, from: isOpen, when: heldEscalated, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Escalated, Held: check.Escalated}, sync(Effect{Kind: CancelJobs}, audit("retest.card_gone"))
	}},
	{on: CardGone, from: isOpen, when: heldAccepted, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Accepted, Held: check.Accepted}, sync(Effect{Kind: CancelJobs}, audit("retest.card_gone"))
	}},
	{on: CardGone, from: isOpen, when: hasClock, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Warned, Deadline: s.Deadline}, sync(Effect{Kind: CancelJobs}, audit("retest.card_gone"))
	}},
	{on: CardGone, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Inconclusive}, sync(Effect{Kind: CancelJobs}, audit("retest.card_gone"))
	}},

	// The clock: a warning past its deadline blocks. While a re-run
	// measures the commit its verdict decides, so the deadline waits; on
	// any other phase the clock no longer applies and is cleared.
	{on: DeadlinePassed, from: is(check.Warned), when: hasClock, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Escalated, Held: check.Escalated}, sync(Effect{Kind: AnnounceEscalation}, audit("regression.escalated"))
	}},
	{on: DeadlinePassed, from: settled, when: hasClock, to: func(s State, e Event) (State, []Effect) {
		s.Deadline = time.Time{}
		return s, nil
	}},

	// A maintainer's `/perf ack`: the held inconclusive check passes as
	// inconclusive (neutral), and the audit log says who let it through.
	{on: Acked, from: is(check.NeedsAck), to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Inconclusive}, sync(audit("inconclusive.acknowledged"))
	}},

	{on: AppealAccepted, from: regressed, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Accepted, Held: check.Accepted}, sync()
	}},

	// A newer push: an open check is concluded (its jobs stopped); a
	// settled one keeps its conclusion but loses its clock — the new
	// commit gets its own.
	{on: NewerPush, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Superseded}, sync(Effect{Kind: CancelJobs})
	}},
	{on: NewerPush, from: settled, when: hasClock, to: func(s State, e Event) (State, []Effect) {
		s.Deadline = time.Time{}
		return s, nil
	}},

	// A closed pull request: nothing runs, nothing escalates. Reopening it
	// requests a new run.
	{on: PRClosed, from: isOpen, to: func(s State, e Event) (State, []Effect) {
		return State{Phase: check.Closed}, sync(Effect{Kind: CancelJobs}, audit("check.closed"))
	}},
	{on: PRClosed, from: settled, when: hasClock, to: func(s State, e Event) (State, []Effect) {
		s.Deadline = time.Time{}
		return s, nil
	}},
}

// carried is the regression a re-run holds: what an escalated or accepted
// check reached, or what an open one (a re-run of a re-run) carried.
func carried(s State) check.Phase {
	switch {
	case s.Phase == check.Escalated || s.Phase == check.Accepted:
		return s.Phase
	case s.Phase.Open():
		return s.Held
	}
	return check.None
}
