package demo

import (
	"fmt"
	"io"
	"math"
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
// check, the runs on each side and the gated metrics.
type prNoise struct {
	Number  int
	What    string // "slows the engine", "only edits a README"
	Phase   check.Phase
	Title   string
	Metrics []string // the tier's gated metrics
	// Head and Base are the runs the gate compared: the head's, and the
	// baseline's (or an interleaved job's base side).
	Head, Base []*result.Result
}

// explain says, for a pull request whose check did not give the story's
// verdict, what the gate said, the noise it measured, the machine's load
// and what to try. load is loadAverage's line; slowdownFlag whether
// --slowdown applies (the simulated engine).
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
	for _, m := range p.Metrics {
		fmt.Fprintf(&b, "   noise measured, %s run to run: %s on the head, %s on the base\n", m, spread(p.Head, m), spread(p.Base, m))
	}
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

// spread is the run-to-run coefficient of variation of metric over runs
// ("18.3% over 3 runs"), or why there is none.
func spread(runs []*result.Result, metric string) string {
	var vs []float64
	for _, r := range runs {
		if v, ok := gate.MedianOf([]*result.Result{r}, metric); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) < 2 {
		return fmt.Sprintf("unknown (%d runs)", len(vs))
	}
	return fmt.Sprintf("±%.1f%% over %d runs", 100*cv(vs), len(vs))
}

// cv is the sample standard deviation over the mean's magnitude.
func cv(vs []float64) float64 {
	var sum float64
	for _, v := range vs {
		sum += v
	}
	mean := sum / float64(len(vs))
	var ss float64
	for _, v := range vs {
		ss += (v - mean) * (v - mean)
	}
	if mean == 0 {
		return 0
	}
	return math.Sqrt(ss/float64(len(vs)-1)) / math.Abs(mean)
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
