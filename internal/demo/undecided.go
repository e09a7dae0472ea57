package demo

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// The default demo's exit codes beyond 0 (the story ran to its end) and 1
// (a step failed or a wait ran out; the message says what it waited for
// and what it saw last). 3 is a usage error. docs/commands.md lists them.
const (
	// ExitUndecided: the gate called a pull request inconclusive — its
	// runs too noisy to decide — so the steps that need its verdict were
	// skipped, and the demo said why and what to try.
	ExitUndecided = 2
	// ExitOtherVerdict: the gate decided, but not what the story expects:
	// the slowed pull request passed (a slowdown inside the threshold), or
	// the docs-only one did not pass, or an engine failed to run.
	ExitOtherVerdict = 4
)

// VerdictError ends a demo whose gate did not give the story's verdicts
// (undecided, or decided otherwise).
// The steps that could run did; Explanation says what the gate said, the
// noise and load it saw, and what to try.
type VerdictError struct {
	Code        int
	Explanation string
}

func (e *VerdictError) Error() string { return e.Explanation }

// ExitCode is the process's exit status for the demo.
func (e *VerdictError) ExitCode() int { return e.Code }

// story is what the demo does after both pull requests' checks concluded:
// whether the 48-hour escalation can follow PR #17's check, and the exit
// code the verdicts lead to.
type story struct {
	escalate bool
	code     int
}

// nextSteps branches on what the gate said. Only a warning has an
// escalation deadline; an inconclusive check has none and never turns into
// a failure, so waiting for one would wait for something that cannot come.
func nextSteps(slow, docs check.Phase) story {
	s := story{escalate: slow == check.Warned}
	switch {
	case undecided(slow) || undecided(docs):
		s.code = ExitUndecided
	case slow != check.Warned || docs != check.Passed:
		s.code = ExitOtherVerdict
	}
	return s
}

// conclude ends the story as the verdicts allow: when PR #17 was not
// warned it says why step 4 is skipped, and when a verdict is not the
// story's it explains each such pull request and returns the error that
// carries the exit code (nil when the story ran to its end).
func conclude(w io.Writer, next story, slow, docs prNoise, load string, slowdownFlag bool) *VerdictError {
	if !next.escalate {
		fmt.Fprintf(w, "4. Skipped: PR #%d's check is %s, not a warning, so no 48-hour deadline runs and it cannot escalate.\n\n", slow.Number, orNone(string(slow.Phase)))
	}
	if next.code == 0 {
		return nil
	}
	var why strings.Builder
	if slow.Phase != check.Warned {
		why.WriteString(explain(slow, load, slowdownFlag))
	}
	if docs.Phase != check.Passed {
		why.WriteString(explain(docs, load, false))
	}
	e := &VerdictError{Code: next.code, Explanation: why.String()}
	fmt.Fprintf(w, "----- what the gate did not decide as the story expects -----\n%s-------------------------------------------------------------\n", e.Explanation)
	return e
}

func undecided(p check.Phase) bool { return p == check.Inconclusive || p == check.NeedsAck }

// prNoise is what the demo knows about one pull request's verdict: the
// check, and the verdict document the server stored with it. The demo
// prints the document's own figures; it computes nothing of its own.
type prNoise struct {
	Number int
	What   string // "slows the engine", "only edits a README"
	Phase  check.Phase
	Title  string
	// Report is the check's stored verdict document (nil: none stored).
	Report *gate.Report
	// Head is the head's measured runs, for the story's description of
	// what ran (its engine, its tree); the verdict's figures are Report's.
	Head []*result.Result
}

// explain says, for a pull request whose check did not give the story's
// verdict, what the gate said, the evidence its document records, the
// machine's load and what to try. load is loadAverage's line;
// slowdownFlag whether --slowdown applies (the simulated engine).
func explain(p prNoise, load string, slowdownFlag bool) string {
	var b strings.Builder
	switch {
	case undecided(p.Phase) && strings.Contains(p.Title, "environment"):
		// Not noise: the runs are not comparable (the check's summary
		// names the fields).
		fmt.Fprintf(&b, "PR #%d (%s): the gate could not decide (check %s, %q): its runs' environment differs from the baseline's.\n", p.Number, p.What, p.Phase, p.Title)
	case undecided(p.Phase):
		fmt.Fprintf(&b, "PR #%d (%s): the gate could not decide (check %s, %q): its runs were too noisy to tell a change from noise.\n", p.Number, p.What, p.Phase, p.Title)
	default:
		fmt.Fprintf(&b, "PR #%d (%s): the check is %s (%q), not what the demo's story expects.\n", p.Number, p.What, orNone(string(p.Phase)), p.Title)
	}
	b.WriteString(evidence(p.Report))
	fmt.Fprintf(&b, "   load average: %s\n", load)
	switch {
	case undecided(p.Phase) && strings.Contains(p.Title, "environment"):
		b.WriteString("   to try: run the demo again, so base and head are measured by the same runner (the check's summary names the fields that differ)\n")
	case undecided(p.Phase) && slowdownFlag:
		b.WriteString("   to try: a larger slowdown, which the same noise cannot hide (`--slowdown 1.5`), or a quieter machine (a load average below the CPU count)\n")
	case undecided(p.Phase):
		b.WriteString("   to try: a quieter machine (a load average below the CPU count): stop other builds and tests while the demo runs\n")
	case p.Phase == check.Passed && slowdownFlag:
		b.WriteString("   to try: a slowdown beyond the tier's threshold (`--slowdown 1.5`)\n")
	case p.Phase == check.Errored:
		b.WriteString("   to try: run with --log-level info to see the engine's error\n")
	}
	return b.String()
}

// evidence prints what the verdict document says the comparison could
// resolve: its headline, and for each gated metric the change, the
// interval of the rule that decided, the noise band the comparison used
// and the smallest change its evidence could call; then the document's
// notes (what settling spent and what would decide). Every figure is the
// document's, as the check run prints it.
func evidence(rep *gate.Report) string {
	if rep == nil {
		return "   the server stored no verdict document for this check\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "   the gate: %s\n", rep.Headline)
	for _, m := range rep.Metrics {
		if rep.Rule == gate.RuleEnvironment {
			break // not compared: the notes say which runs differ
		}
		if m.Secondary || !m.Measured() {
			continue
		}
		fmt.Fprintf(&b, "   %s: change %s, interval %s, noise band %s, smallest change these runs could call %s\n",
			m.Name(), m.DeltaText(), m.IntervalText(), m.BandText(), m.DetectableText())
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "   note: %s\n", n)
	}
	return b.String()
}

// loadAverage is the host's load line: "9.87, 7.01, 4.20 (1, 5, 15 min) on
// 2 CPUs".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	return loadLine(string(b), err, runtime.NumCPU())
}

func loadLine(procLoadavg string, err error, cpus int) string {
	f := strings.Fields(procLoadavg)
	if err != nil || len(f) < 3 {
		return fmt.Sprintf("unknown here (no /proc/loadavg) on %d CPUs", cpus)
	}
	return fmt.Sprintf("%s, %s, %s (1, 5, 15 min) on %d CPUs", f[0], f[1], f[2], cpus)
}
