package check

// Phase is where a check run is. The values are the store's state strings.
type Phase string

// Phases.
const (
	None          Phase = ""             // no check run for this commit yet
	Queued        Phase = "queued"       // jobs queued, none started
	InProgress    Phase = "in_progress"  // a runner is measuring
	Passed        Phase = "passed"       // no regression
	Warned        Phase = "warned"       // a regression, not yet blocking; the clock runs
	Escalated     Phase = "escalated"    // a regression unresolved past its deadline: blocking
	Accepted      Phase = "accepted"     // a regression accepted on appeal
	Inconclusive  Phase = "inconclusive" // the evidence cannot decide (or the runner failed)
	NeedsAck      Phase = "needs_ack"    // inconclusive on a tier that holds it until a maintainer acknowledges it
	Errored       Phase = "errored"      // the commit's engine could not be measured
	Skipped       Phase = "skipped"      // nothing gated changed, or a draft
	Superseded    Phase = "superseded"   // a newer push replaced the commit before it was judged
	Closed        Phase = "closed"       // the pull request was closed before the check ended
	Waiting       Phase = "waiting"      // a fork's code waits for a maintainer
	ConfigError   Phase = "config_error" // .github/perfgate.yml is broken
	NotConfigured Phase = "not_configured"
)

// Open reports whether the phase still waits for jobs.
func (p Phase) Open() bool { return p == Queued || p == InProgress }

// Check is how GitHub shows the phase: the check run's status and, once
// completed, its conclusion. For required checks GitHub counts neutral and
// skipped as passing, so a warning is neutral and only an escalated
// regression, a broken config or a broken engine block.
func (p Phase) Check() (status, conclusion string) {
	switch p {
	case Queued, None:
		return "queued", ""
	case InProgress:
		return "in_progress", ""
	case Passed, Accepted:
		return "completed", "success"
	case Warned, Inconclusive, NotConfigured:
		return "completed", "neutral"
	case Skipped:
		return "completed", "skipped"
	case Superseded, Closed:
		return "completed", "cancelled"
	case Waiting, NeedsAck:
		return "completed", "action_required"
	default: // escalated, errored, config error: fail safe
		return "completed", "failure"
	}
}

// Conclusion is the check run conclusion GitHub shows for a completed
// phase ("" while it is open).
func (p Phase) Conclusion() string {
	_, c := p.Check()
	return c
}

// Button is a check run action.
type Button struct {
	Label, Description, Identifier string
}

// Buttons returns the buttons a concluded run in phase p offers: Retest
// whenever a re-measurement could change the outcome, Appeal when a
// regression blocks or warns, Approve on a fork's commit that waits for an
// approval.
func Buttons(p Phase) []Button {
	retest := Button{Label: "Retest", Description: "Re-run the benchmark on this commit", Identifier: "retest"}
	appeal := Button{Label: "Appeal", Description: "Contest this regression", Identifier: "appeal"}
	approve := Button{Label: "Approve", Description: "Run this fork commit on the runners", Identifier: "approve"}
	switch p {
	case Warned, Escalated:
		return []Button{retest, appeal}
	case Inconclusive, NeedsAck, Errored:
		return []Button{retest}
	case Waiting:
		return []Button{approve}
	}
	return nil
}
