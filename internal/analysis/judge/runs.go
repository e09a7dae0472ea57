package judge

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// judgeRuns judges a plain plan's runs against a stored baseline, or
// against the base commit measured for the check (promoted first).
func judgeRuns(in Input) Decision {
	ev := in.Runs
	notes := append([]string{}, ev.Bad...)
	base := in.Base
	var promotions []Promotion
	if mb := in.MeasuredBase; mb != nil {
		if len(mb.Runs) == 0 {
			// The PR's own runs succeeded; a base commit that cannot be
			// measured is not its fault, so this does not block it.
			return broken(true, append(append([]string{"the baseline measurement of the base commit failed"}, mb.Failures...), mb.Bad...))
		}
		promotions = []Promotion{{Key: in.Key, Runs: mb.Runs, At: len(notes)}}
		notes = append(notes, "the base commit's runs are promoted as the first `"+in.Key+"` baseline")
		base = &Base{Runs: mb.Runs}
	}
	if len(ev.Runs) == 0 {
		d := fail(in.Job, ev)
		d.Promotions = unplaced(promotions)
		return d
	}
	if base == nil {
		return Decision{Outcome: MeasureBase}
	}
	opt := gate.Options{History: in.History, Looks: prLooks(in, ev.Runs), CandidateSessions: ev.Sessions}
	budget := in.Settle.spend(in.Tier)
	opt, stands := nextLook(opt, budget, len(ev.Runs), in.Stored)
	if stands {
		return Decision{Outcome: Stands, Key: in.Key, Promotions: unplaced(promotions)}
	}
	rep, err := gate.Compare(base.Runs, ev.Runs, in.Tier, opt)
	if err != nil {
		d := broken(false, append([]string{"compare: " + err.Error()}, notes...))
		d.Promotions = shifted(promotions, 1)
		return d
	}
	looks := map[string]gate.Looks{in.Key: rep.Looks}
	if more := rep.NeedMoreRuns - rep.CandidateRuns; rep.Verdict == gate.Inconclusive && more > 0 && budget.fits(more) {
		return Decision{Outcome: Extend, More: more, Report: rep, Looks: looks, Promotions: unplaced(promotions)}
	}
	env := envOf(ev.Runs)
	notes = append(notes, budget.note(rep, env)...)
	var trends []Trend
	if in.DefaultBranch {
		trends = []Trend{{Key: in.Key, Job: in.Job.ID, Runs: ev.Runs}}
	}
	notes = append(notes, engineFailureNotes(base.Runs, ev.Runs)...)
	return Decision{Outcome: Publish, Report: rep, Env: env, Notes: notes, Looks: looks,
		Settings: result.DiffSettings(settingsOf(base.Runs), settingsOf(ev.Runs)), Trends: trends, Promotions: promotions}
}

// fail is the decision on a check whose runs could not be measured or
// judged. A lost agent or an unreadable result is the runner's fault and
// stays neutral; an engine that would not start or answered errors is the
// commit's, and fails.
func fail(job Ended, ev Evidence) Decision {
	reasons := append(append([]string{}, ev.Failures...), ev.Bad...)
	failures := ev.Failures
	if len(reasons) == 0 {
		reason := job.FailureReason
		if reason == "" {
			reason = fmt.Sprintf("job %d ended %s with no measured runs", job.ID, job.Status)
		}
		reasons = []string{reason}
		failures = reasons
	}
	// Neutral only when every failure was the runner's: one engine failure
	// among them is the commit's, whatever else was lost.
	runnerFault := true
	for _, r := range failures {
		if !IsAgentLost(r) {
			runnerFault = false
		}
	}
	return broken(runnerFault, reasons)
}

func broken(runnerFault bool, reasons []string) Decision {
	return Decision{Outcome: Broken, RunnerFault: runnerFault, Reasons: reasons}
}

// unplaced are promotions whose notes the outcome does not show.
func unplaced(ps []Promotion) []Promotion {
	for i := range ps {
		ps[i].At = -1
	}
	return ps
}

// shifted are promotions whose notes moved by n places.
func shifted(ps []Promotion, n int) []Promotion {
	for i := range ps {
		if ps[i].At >= 0 {
			ps[i].At += n
		}
	}
	return ps
}

// IsAgentLost reports whether a failure reason is the runner's (the
// store's reaper writes "agent lost: …").
func IsAgentLost(reason string) bool { return strings.Contains(reason, "agent lost") }
