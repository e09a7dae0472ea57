package checkstate

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/check"
)

var (
	now      = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	deadline = now.Add(48 * time.Hour)
	after    = 48 * time.Hour
)

var allPhases = []check.Phase{check.None, check.Queued, check.InProgress, check.Passed, check.Warned, check.Escalated, check.Accepted, check.Inconclusive, check.NeedsAck, check.Errored,
	check.Skipped, check.Superseded, check.Closed, check.Waiting, check.ConfigError, check.NotConfigured}

var allKinds = []Kind{Requested, Concluded, Started, Progressed, GatePass, GateRegression, GateUndecided, Broken,
	DeadlinePassed, AppealAccepted, Acked, NewerPush, PRClosed, QueueMoved, CardGone}

// fx abbreviates effect lists in the table.
func fx(kinds ...any) []Effect {
	var out []Effect
	for _, k := range kinds {
		switch k := k.(type) {
		case EffectKind:
			out = append(out, Effect{Kind: k})
		case string:
			out = append(out, Effect{Kind: Audit, Action: k})
		}
	}
	return out
}

type row struct {
	name    string
	from    State
	ev      Event
	to      State
	effects []Effect
}

// table is every transition the lifecycle makes. A (phase, event) pair not
// listed here for a state must be ignored: TestEveryOtherEventIgnored
// checks that.
var table = []row{
	// Requested: from anywhere, a new GitHub run; the clock and a held
	// regression carry over; an open run's jobs are cancelled with it.
	{"first run", State{}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck)},
	{"re-request while queued stops the queued jobs", State{Phase: check.Queued}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck, CancelJobs)},
	{"re-request while running stops the running jobs", State{Phase: check.InProgress}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck, CancelJobs)},
	{"retest of a warning keeps the clock", State{Phase: check.Warned, Deadline: deadline}, Event{Kind: Requested},
		State{Phase: check.Queued, Deadline: deadline}, fx(SyncCheck, NewCheck)},
	{"retest of an escalation holds it", State{Phase: check.Escalated}, Event{Kind: Requested}, State{Phase: check.Queued, Held: check.Escalated}, fx(SyncCheck, NewCheck)},
	{"retest of an accepted regression holds it", State{Phase: check.Accepted, Held: check.Accepted}, Event{Kind: Requested}, State{Phase: check.Queued, Held: check.Accepted}, fx(SyncCheck, NewCheck)},
	{"retest while a retest runs keeps what it held", State{Phase: check.InProgress, Held: check.Escalated, Deadline: deadline}, Event{Kind: Requested},
		State{Phase: check.Queued, Held: check.Escalated, Deadline: deadline}, fx(SyncCheck, NewCheck, CancelJobs)},
	{"re-run after a pass holds nothing", State{Phase: check.Passed, Held: check.Accepted}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck)},
	{"reopened after close", State{Phase: check.Closed}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck)},
	{"fork approved after waiting", State{Phase: check.Waiting}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck)},
	{"retest of a held inconclusive check", State{Phase: check.NeedsAck}, Event{Kind: Requested}, State{Phase: check.Queued}, fx(SyncCheck, NewCheck)},

	// Concluded without a run.
	{"skipped", State{}, Event{Kind: Concluded, Phase: check.Skipped}, State{Phase: check.Skipped}, fx(SyncCheck, NewCheck)},
	{"config broken while a run is queued", State{Phase: check.Queued}, Event{Kind: Concluded, Phase: check.ConfigError},
		State{Phase: check.ConfigError}, fx(SyncCheck, NewCheck, CancelJobs)},
	{"waiting replaces a warning and its clock", State{Phase: check.Warned, Deadline: deadline}, Event{Kind: Concluded, Phase: check.Waiting},
		State{Phase: check.Waiting}, fx(SyncCheck, NewCheck)},

	{"started", State{Phase: check.Queued, Deadline: deadline}, Event{Kind: Started}, State{Phase: check.InProgress, Deadline: deadline}, fx(SyncCheck)},
	{"progress while queued", State{Phase: check.Queued}, Event{Kind: Progressed}, State{Phase: check.InProgress}, fx(SyncCheck)},
	{"progress while running", State{Phase: check.InProgress, Held: check.Accepted}, Event{Kind: Progressed}, State{Phase: check.InProgress, Held: check.Accepted}, fx(SyncCheck)},
	{"queue moved", State{Phase: check.Queued}, Event{Kind: QueueMoved}, State{Phase: check.Queued}, fx(SyncCheck)},
	{"queue moved keeps a retest's clock and hold", State{Phase: check.Queued, Deadline: deadline, Held: check.Escalated}, Event{Kind: QueueMoved},
		State{Phase: check.Queued, Deadline: deadline, Held: check.Escalated}, fx(SyncCheck)},

	// The gate.
	{"pass", State{Phase: check.InProgress}, Event{Kind: GatePass}, State{Phase: check.Passed}, fx(SyncCheck, "gate.pass")},
	{"pass resolves a warned commit", State{Phase: check.InProgress, Deadline: deadline}, Event{Kind: GatePass}, State{Phase: check.Passed}, fx(SyncCheck, "regression.resolved", "gate.pass")},
	{"pass resolves an escalation", State{Phase: check.Queued, Held: check.Escalated}, Event{Kind: GatePass}, State{Phase: check.Passed}, fx(SyncCheck, "regression.resolved", "gate.pass")},
	{"fresh regression warns", State{Phase: check.InProgress}, Event{Kind: GateRegression, Now: now, EscalateAfter: after},
		State{Phase: check.Warned, Deadline: now.Add(after)}, fx(SyncCheck, WarnAuthor, "gate.regression")},
	{"regression again keeps the clock, no second warning", State{Phase: check.InProgress, Deadline: deadline}, Event{Kind: GateRegression, Now: now.Add(time.Hour), EscalateAfter: after},
		State{Phase: check.Warned, Deadline: deadline}, fx(SyncCheck, "gate.regression")},
	{"escalation confirmed stays blocking", State{Phase: check.InProgress, Held: check.Escalated}, Event{Kind: GateRegression, Now: now, EscalateAfter: after},
		State{Phase: check.Escalated, Held: check.Escalated}, fx(SyncCheck, "gate.regression")},
	{"accepted regression confirmed stays accepted", State{Phase: check.InProgress, Held: check.Accepted, Deadline: deadline}, Event{Kind: GateRegression, Now: now},
		State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck, "gate.regression")},
	{"appeal accepted while the retest ran", State{Phase: check.InProgress, Deadline: deadline}, Event{Kind: GateRegression, Now: now, AcceptedOnAppeal: true},
		State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck, "gate.regression")},
	{"regression on the first runs while a retest is queued", State{Phase: check.Queued}, Event{Kind: GateRegression, Now: now, EscalateAfter: after},
		State{Phase: check.Warned, Deadline: now.Add(after)}, fx(SyncCheck, WarnAuthor, "gate.regression")},
	{"undecided while queued", State{Phase: check.Queued}, Event{Kind: GateUndecided}, State{Phase: check.Inconclusive}, fx(SyncCheck, "gate.inconclusive")},
	{"undecided", State{Phase: check.InProgress, Deadline: deadline, Held: check.Escalated}, Event{Kind: GateUndecided}, State{Phase: check.Inconclusive}, fx(SyncCheck, "gate.inconclusive")},
	{"undecided on a needs_ack tier holds the check", State{Phase: check.InProgress}, Event{Kind: GateUndecided, NeedsAck: true},
		State{Phase: check.NeedsAck}, fx(SyncCheck, "gate.inconclusive")},
	{"undecided on a needs_ack tier drops an escalation's hold", State{Phase: check.Queued, Held: check.Escalated, Deadline: deadline}, Event{Kind: GateUndecided, NeedsAck: true},
		State{Phase: check.NeedsAck}, fx(SyncCheck, "gate.inconclusive")},
	{"a maintainer's ack passes a held inconclusive check", State{Phase: check.NeedsAck}, Event{Kind: Acked},
		State{Phase: check.Inconclusive}, fx(SyncCheck, "inconclusive.acknowledged")},
	{"an ack leaves no clock behind", State{Phase: check.NeedsAck, Deadline: deadline}, Event{Kind: Acked},
		State{Phase: check.Inconclusive}, fx(SyncCheck, "inconclusive.acknowledged")},
	{"runner lost", State{Phase: check.InProgress}, Event{Kind: Broken, RunnerFault: true}, State{Phase: check.Inconclusive}, fx(SyncCheck, "gate.broken")},
	{"engine failed", State{Phase: check.Queued, Deadline: deadline}, Event{Kind: Broken}, State{Phase: check.Errored}, fx(SyncCheck, "gate.broken")},

	// The clock.
	{"deadline escalates a warning", State{Phase: check.Warned, Deadline: deadline}, Event{Kind: DeadlinePassed},
		State{Phase: check.Escalated, Held: check.Escalated}, fx(SyncCheck, AnnounceEscalation, "regression.escalated")},
	{"deadline on an accepted commit is cleared", State{Phase: check.Accepted, Held: check.Accepted, Deadline: deadline}, Event{Kind: DeadlinePassed}, State{Phase: check.Accepted, Held: check.Accepted}, nil},

	{"appeal accepted on a warning", State{Phase: check.Warned, Deadline: deadline}, Event{Kind: AppealAccepted}, State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck)},
	{"appeal accepted on an escalation", State{Phase: check.Escalated, Held: check.Escalated}, Event{Kind: AppealAccepted}, State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck)},
	{"appeal accepted on a warning whose clock a push stopped", State{Phase: check.Warned}, Event{Kind: AppealAccepted}, State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck)},
	{"appeal accepted on an escalation with a stale clock", State{Phase: check.Escalated, Deadline: deadline}, Event{Kind: AppealAccepted}, State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck)},

	{"newer push concludes a queued check", State{Phase: check.Queued, Deadline: deadline}, Event{Kind: NewerPush}, State{Phase: check.Superseded}, fx(SyncCheck, CancelJobs)},
	{"newer push concludes a running check", State{Phase: check.InProgress}, Event{Kind: NewerPush}, State{Phase: check.Superseded}, fx(SyncCheck, CancelJobs)},

	{"card gone under a retest of an escalation", State{Phase: check.Queued, Held: check.Escalated}, Event{Kind: CardGone},
		State{Phase: check.Escalated, Held: check.Escalated}, fx(SyncCheck, CancelJobs, "retest.card_gone")},
	{"card gone under a retest of an accepted regression", State{Phase: check.InProgress, Held: check.Accepted, Deadline: deadline}, Event{Kind: CardGone},
		State{Phase: check.Accepted, Held: check.Accepted}, fx(SyncCheck, CancelJobs, "retest.card_gone")},

	{"closed PR cancels a queued check", State{Phase: check.Queued}, Event{Kind: PRClosed}, State{Phase: check.Closed}, fx(SyncCheck, CancelJobs, "check.closed")},
	{"closed PR cancels a running check", State{Phase: check.InProgress, Held: check.Escalated, Deadline: deadline}, Event{Kind: PRClosed}, State{Phase: check.Closed}, fx(SyncCheck, CancelJobs, "check.closed")},
}

// The gate, the push and the close act on a queued check (a retest's jobs
// judged with the first, a runner lost before it started) exactly as on a
// running one, with the clock and without.
func init() {
	for _, p := range []check.Phase{check.Queued, check.InProgress} {
		for _, clock := range []time.Time{{}, deadline} {
			withClock := func(ph check.Phase) State { return State{Phase: ph, Deadline: clock} }
			warnedAt := clock
			warn := fx(SyncCheck, "gate.regression")
			if clock.IsZero() {
				warnedAt, warn = now.Add(after), fx(SyncCheck, WarnAuthor, "gate.regression")
			}
			pass := fx(SyncCheck, "gate.pass")
			if !clock.IsZero() {
				pass = fx(SyncCheck, "regression.resolved", "gate.pass")
			}
			for _, r := range []row{
				{"progress", withClock(p), Event{Kind: Progressed}, withClock(check.InProgress), fx(SyncCheck)},
				{"pass", withClock(p), Event{Kind: GatePass}, State{Phase: check.Passed}, pass},
				{"regression", withClock(p), Event{Kind: GateRegression, Now: now, EscalateAfter: after}, State{Phase: check.Warned, Deadline: warnedAt}, warn},
				{"undecided", withClock(p), Event{Kind: GateUndecided}, State{Phase: check.Inconclusive}, fx(SyncCheck, "gate.inconclusive")},
				{"undecided, needs ack", withClock(p), Event{Kind: GateUndecided, NeedsAck: true}, State{Phase: check.NeedsAck}, fx(SyncCheck, "gate.inconclusive")},
				{"runner lost", withClock(p), Event{Kind: Broken, RunnerFault: true}, State{Phase: check.Inconclusive}, fx(SyncCheck, "gate.broken")},
				{"engine failed", withClock(p), Event{Kind: Broken}, State{Phase: check.Errored}, fx(SyncCheck, "gate.broken")},
				{"newer push", withClock(p), Event{Kind: NewerPush}, State{Phase: check.Superseded}, fx(SyncCheck, CancelJobs)},
				{"PR closed", withClock(p), Event{Kind: PRClosed}, State{Phase: check.Closed}, fx(SyncCheck, CancelJobs, "check.closed")},
				{"card gone", withClock(p), Event{Kind: CardGone}, cardGoneTo(clock), fx(SyncCheck, CancelJobs, "retest.card_gone")},
				{"deadline waits for the run", withClock(p), Event{Kind: DeadlinePassed}, State{}, nil},
			} {
				r.name = fmt.Sprintf("%s while %s (clock %v)", r.name, p, !clock.IsZero())
				if r.ev.Kind == DeadlinePassed {
					ignoredRows = append(ignoredRows, r)
					continue
				}
				table = append(table, r)
			}
		}
		table = append(table, row{fmt.Sprintf("concluded while %s cancels its jobs", p), State{Phase: p}, Event{Kind: Concluded, Phase: check.NotConfigured},
			State{Phase: check.NotConfigured}, fx(SyncCheck, NewCheck, CancelJobs)})
	}
	table = append(table, row{"started with a clock", State{Phase: check.Queued, Deadline: deadline}, Event{Kind: Started}, State{Phase: check.InProgress, Deadline: deadline}, fx(SyncCheck)},
		row{"started", State{Phase: check.Queued}, Event{Kind: Started}, State{Phase: check.InProgress}, fx(SyncCheck)})
}

// ignoredRows are named events that must do nothing.
var ignoredRows []row

func TestIgnored(t *testing.T) {
	t.Parallel()
	extra := []row{
		{"late result on a superseded check", State{Phase: check.Superseded}, Event{Kind: GateRegression}, State{}, nil},
		{"late result on a closed PR's check", State{Phase: check.Closed}, Event{Kind: GatePass}, State{}, nil},
		{"second escalation", State{Phase: check.Escalated, Held: check.Escalated}, Event{Kind: DeadlinePassed}, State{}, nil},
		{"appeal on a passed check", State{Phase: check.Passed}, Event{Kind: AppealAccepted}, State{}, nil},
		{"appeal while the retest runs", State{Phase: check.InProgress, Deadline: deadline}, Event{Kind: AppealAccepted}, State{}, nil},
		{"start of a running check", State{Phase: check.InProgress}, Event{Kind: Started}, State{}, nil},
		{"push over a check with no clock", State{Phase: check.Passed}, Event{Kind: NewerPush}, State{}, nil},
		{"ack of a passing inconclusive check", State{Phase: check.Inconclusive}, Event{Kind: Acked}, State{}, nil},
		{"ack while the runs are measured", State{Phase: check.InProgress}, Event{Kind: Acked}, State{}, nil},
		{"ack of a regression", State{Phase: check.Warned, Deadline: deadline}, Event{Kind: Acked}, State{}, nil},
		{"appeal of a held inconclusive check", State{Phase: check.NeedsAck}, Event{Kind: AppealAccepted}, State{}, nil},
	}
	for _, r := range append(ignoredRows, extra...) {
		if _, effects, err := Transition(r.from, r.ev); !errors.Is(err, ErrIgnored) || effects != nil {
			t.Errorf("%s: %v %v, want ErrIgnored and no effects", r.name, effects, err)
		}
	}
}

// On every settled phase a clock that no longer applies is cleared: a
// deadline that passes on anything but a warning, a newer push, a closed PR.
func init() {
	for _, p := range allPhases {
		if p == check.None || p.Open() {
			continue
		}
		for _, k := range []Kind{DeadlinePassed, NewerPush, PRClosed} {
			if k == DeadlinePassed && p == check.Warned {
				continue // escalates: its own row
			}
			table = append(table, row{fmt.Sprintf("%s on %s clears the clock", k, p),
				State{Phase: p, Deadline: deadline}, Event{Kind: k}, State{Phase: p}, nil})
		}
	}
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	for _, tt := range table {
		t.Run(tt.name, func(t *testing.T) {
			got, effects, err := Transition(tt.from, tt.ev)
			if err != nil {
				t.Fatalf("Transition(%+v, %s): %v", tt.from, tt.ev.Kind, err)
			}
			if got != tt.to {
				t.Errorf("state = %+v, want %+v", got, tt.to)
			}
			if !reflect.DeepEqual(effects, tt.effects) {
				t.Errorf("effects = %v, want %v", effects, tt.effects)
			}
		})
	}
}

// Every (phase, event) pair that the table does not list is ignored: a
// late job result on a superseded or closed check, a second escalation, an
// appeal on a passed check, a start of a running check. States are tried
// with and without a clock and a held regression.
func TestEveryOtherEventIgnored(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, tt := range table {
		listed[key(tt.from, tt.ev.Kind)] = true
	}
	if len(listed) < 40 {
		t.Fatalf("the table lists %d transitions; expected the whole lifecycle", len(listed))
	}
	var variants []State
	for _, p := range allPhases {
		for _, d := range []time.Time{{}, deadline} {
			for _, h := range []check.Phase{check.None, check.Escalated, check.Accepted} {
				variants = append(variants, State{Phase: p, Deadline: d, Held: h})
			}
		}
	}
	for _, s := range variants {
		for _, k := range allKinds {
			_, _, err := Transition(s, Event{Kind: k, Phase: check.Skipped, Now: now, EscalateAfter: after})
			if err == nil && !listed[key(s, k)] && k != Requested && k != Concluded {
				t.Errorf("%s applies in %+v but no table row covers it", k, s)
			}
			if err != nil && !errors.Is(err, ErrIgnored) {
				t.Errorf("%s in %+v: %v", k, s, err)
			}
			if err != nil && mustApply(s, k) {
				t.Errorf("%s in %+v is ignored, want it to apply", k, s)
			}
		}
	}
}

// mustApply are the pairs the lifecycle may never ignore.
func mustApply(s State, k Kind) bool {
	switch k {
	case Requested, Concluded:
		return true
	case GatePass, GateRegression, GateUndecided, Broken, NewerPush, PRClosed, Progressed, CardGone:
		return s.Phase.Open()
	case Started, QueueMoved:
		return s.Phase == check.Queued
	case AppealAccepted:
		return s.Phase == check.Warned || s.Phase == check.Escalated
	case Acked:
		return s.Phase == check.NeedsAck
	case DeadlinePassed:
		return s.Phase == check.Warned && !s.Deadline.IsZero()
	}
	return false
}

// key identifies a transition by phase, event and whether a clock runs;
// the held regression only selects among rows the table names.
func key(s State, k Kind) string {
	return fmt.Sprintf("%s/%s/clock=%v", s.Phase, k, !s.Deadline.IsZero())
}

// No open check survives its jobs' verdict, and every settled phase shows
// as completed on GitHub.
func TestEveryVerdictCompletesTheCheck(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{GatePass, GateRegression, GateUndecided, Broken, NewerPush, PRClosed, CardGone} {
		for _, p := range []check.Phase{check.Queued, check.InProgress} {
			for _, h := range []check.Phase{check.None, check.Escalated, check.Accepted} {
				got, _, err := Transition(State{Phase: p, Held: h}, Event{Kind: k, Now: now, EscalateAfter: after})
				if err != nil {
					t.Fatalf("%s on %s: %v", k, p, err)
				}
				if status, _ := got.Phase.Check(); status != "completed" {
					t.Errorf("%s on %s (held %s) leaves the check %s (%s)", k, p, h, status, got.Phase)
				}
			}
		}
	}
	for _, p := range allPhases {
		status, conclusion := p.Check()
		if p.Open() || p == check.None {
			if status == "completed" {
				t.Errorf("open phase %s shows completed", p)
			}
			continue
		}
		if status != "completed" || conclusion == "" {
			t.Errorf("settled phase %s shows %s/%q", p, status, conclusion)
		}
	}
}

// cardGoneTo is where a retest whose card is gone leaves a check with no
// held regression: its warning's clock, else inconclusive.
func cardGoneTo(clock time.Time) State {
	if clock.IsZero() {
		return State{Phase: check.Inconclusive}
	}
	return State{Phase: check.Warned, Deadline: clock}
}
