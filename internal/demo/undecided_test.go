package demo

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// The demo branches on what the gate said: only a warning escalates, and
// every verdict the story does not expect ends with its own exit code.
func TestNextSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		slow, docs check.Phase
		escalate   bool
		code       int
	}{
		{check.Warned, check.Passed, true, 0},
		{check.Inconclusive, check.Passed, false, ExitUndecided},
		{check.NeedsAck, check.Passed, false, ExitUndecided},
		{check.Warned, check.Inconclusive, true, ExitUndecided}, // #17 still escalates; #18 is explained
		{check.Inconclusive, check.Inconclusive, false, ExitUndecided},
		{check.Passed, check.Passed, false, ExitOtherVerdict},
		{check.Errored, check.Passed, false, ExitOtherVerdict},
		{check.Warned, check.Warned, true, ExitOtherVerdict},
	}
	for _, tt := range tests {
		got := nextSteps(tt.slow, tt.docs)
		if got.escalate != tt.escalate || got.code != tt.code {
			t.Errorf("nextSteps(%s, %s) = escalate %v, exit %d; want %v, %d", tt.slow, tt.docs, got.escalate, got.code, tt.escalate, tt.code)
		}
	}
}

// caseReport is the verdict document gatetest makes for the named case,
// as the server would have stored it.
func caseReport(t *testing.T, name string) *gate.Report {
	t.Helper()
	c, err := gatetest.Named(name)
	if err != nil {
		t.Fatal(err)
	}
	return c.Report
}

// The inconclusive branch, from the verdict document of noisy runs: the
// escalation step is skipped, and the explanation carries the document's
// own figures (its headline, each gated metric's interval, noise band and
// detectable change, its notes), the load and what to try; the error
// carries its exit code.
func TestConcludeExplainsWhatTheGateCouldNotDecide(t *testing.T) {
	t.Parallel()
	const load = "15.20, 12.01, 9.13 (1, 5, 15 min) on 2 CPUs"
	rep := caseReport(t, "inconclusive_more_runs")
	var tpot gate.MetricResult
	for _, m := range rep.Metrics {
		if m.Metric == "tpot_median" {
			tpot = m
		}
	}
	row := "TPOT median: change " + tpot.DeltaText() + ", interval " + tpot.IntervalText() + ", noise band " + tpot.BandText() + ", smallest change these runs could call " + tpot.DetectableText()
	noisy := prNoise{Number: slowPR, What: "slows the engine", Phase: check.Inconclusive, Title: "Inconclusive", Report: rep}
	docs := prNoise{Number: docsPR, What: "only edits a README", Phase: check.Passed, Title: "No regression"}
	tests := []struct {
		name         string
		slow, docs   prNoise
		slowdownFlag bool
		code         int
		want, not    []string
	}{
		{"sim: #17 inconclusive", noisy, docs, true, ExitUndecided,
			[]string{"4. Skipped: PR #17's check is inconclusive", "PR #17 (slows the engine): the gate could not decide", "\"Inconclusive\"",
				"the gate: " + rep.Headline, row,
				"load average: " + load, "`--slowdown 1.5`", "a quieter machine"},
			[]string{"48 hours pass", "PR #18"}},
		{"ollama: #17 inconclusive", noisy, docs, false, ExitUndecided,
			[]string{"4. Skipped", "a quieter machine", "load average: " + load},
			[]string{"--slowdown"}},
		{"#18 inconclusive, #17 warned", prNoise{Number: slowPR, Phase: check.Warned},
			prNoise{Number: docsPR, What: "only edits a README", Phase: check.NeedsAck, Title: "Inconclusive: needs a maintainer's acknowledgement"},
			true, ExitUndecided,
			[]string{"PR #18 (only edits a README): the gate could not decide", "the server stored no verdict document", "a quieter machine"},
			[]string{"4. Skipped", "PR #17", "--slowdown"}},
		{"#17 inconclusive: environment", prNoise{Number: slowPR, What: "slows the engine", Phase: check.Inconclusive, Title: "Inconclusive: environment differs from the baseline"}, docs, true, ExitUndecided,
			[]string{"its runs' environment differs from the baseline's", "4. Skipped", "the fields that differ"},
			[]string{"too noisy", "--slowdown"}},
		{"#17 passed", prNoise{Number: slowPR, What: "slows the engine", Phase: check.Passed, Title: "No regression"}, docs, true, ExitOtherVerdict,
			[]string{"4. Skipped: PR #17's check is passed", "not what the demo's story expects", "`--slowdown 1.5`"},
			[]string{"could not decide"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			err := conclude(&out, nextSteps(tt.slow.Phase, tt.docs.Phase), tt.slow, tt.docs, load, tt.slowdownFlag)
			if err == nil {
				t.Fatalf("no error; want exit %d\n%s", tt.code, out.String())
			}
			var u *VerdictError
			if !errors.As(error(err), &u) || u.ExitCode() != tt.code {
				t.Errorf("exit %d, want %d", err.ExitCode(), tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the demo does not say %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("the demo says %q:\n%s", w, out.String())
				}
			}
			if !strings.Contains(out.String(), err.Explanation) {
				t.Errorf("the printed story lacks the error's explanation %q", err.Explanation)
			}
		})
	}
	// The story's verdicts: no explanation, no error.
	var out strings.Builder
	if err := conclude(&out, nextSteps(check.Warned, check.Passed), prNoise{Number: slowPR, Phase: check.Warned}, docs, load, true); err != nil || out.Len() > 0 {
		t.Errorf("warned and passed: %v, %q; want nothing", err, out.String())
	}
}

func TestLoadLine(t *testing.T) {
	t.Parallel()
	if got, want := loadLine("3.52 2.10 1.05 3/512 4242\n", nil, 2), "3.52, 2.10, 1.05 (1, 5, 15 min) on 2 CPUs"; got != want {
		t.Errorf("loadLine = %q, want %q", got, want)
	}
	if got := loadLine("", errors.New("no such file"), 8); !strings.Contains(got, "unknown") || !strings.Contains(got, "8 CPUs") {
		t.Errorf("loadLine without /proc = %q", got)
	}
}

// A wait that runs out says what it waited for and what the check runs
// said last, newest first.
func TestWaitSaysWhyItEnded(t *testing.T) {
	t.Parallel()
	gh := githubtest.Start()
	t.Cleanup(gh.Close)
	_, err := waitCheckFor(t.Context(), gh, time.Millisecond, "PR #17's quick check on abc1234 to complete", func(githubtest.CheckRun) bool { return false })
	for _, want := range []string{"timed out after 1ms waiting for PR #17's quick check on abc1234 to complete", "no check run was created"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	runs := []githubtest.CheckRun{
		{ID: 1, Name: "perfgate / quick", HeadSHA: "aaaaaaaaaa", Status: "completed", Conclusion: "neutral", Title: "Inconclusive", Statuses: []string{"queued", "in_progress", "completed"}},
		{ID: 2, Name: "perfgate / quick", HeadSHA: "bbbbbbbbbb", Status: "in_progress", Statuses: []string{"queued", "in_progress"}},
	}
	got := lastChecks(runs)
	want := `the check runs said last: "perfgate / quick" on bbbbbbb: in_progress (statuses queued → in_progress); "perfgate / quick" on aaaaaaa: completed, neutral, "Inconclusive" (statuses queued → in_progress → completed)`
	if got != want {
		t.Errorf("lastChecks:\n got %s\nwant %s", got, want)
	}
}
