package dispatch

import (
	"math"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// doc reads the verdict document of sha's quick check.
func (l *lifecycle) doc(sha string) verdictDoc {
	l.t.Helper()
	return l.svc.docOf(l.row(sha))
}

// scaled is quickRuns(len(factors)) with run i's latencies times
// factors[i] (and its throughputs divided by it).
func scaled(factors ...float64) []*result.Result {
	runs := quickRuns(len(factors))
	for i, r := range runs {
		for k := range r.Metrics {
			r.Metrics[k] *= factors[i]
		}
		r.OutputThroughput /= factors[i]
		r.RequestThroughput /= factors[i]
	}
	return runs
}

// Every judgement of a commit spends from the look budget its check row
// keeps: a retest judges at the next look's α (here the last the quick
// tier's settle budget pays for: what is left of α), with the retest's
// runs as a session of their own; a new commit starts afresh.
func TestLooksCarriedAcrossRetests(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	l.request(headSHA, false)
	l.runAll()
	first := l.doc(headSHA)
	looks := first.Looks["quick"]
	if first.Report == nil || len(looks.Spent) != 1 || first.Report.Look() != 1 {
		t.Fatalf("after the first judgement: looks %+v, report %+v", looks, first.Report)
	}
	alpha := 1 - 0.99 // the quick tier's confidence
	a1 := gate.AlphaForLook(gate.PlanPocock, alpha, 1, gate.DefaultMaxLooks)
	if math.Abs(looks.Spent[0].Alpha-a1) > 1e-12 || math.Abs(first.Report.Alpha-a1) > 1e-12 {
		t.Errorf("first look spent α %g (report %g), want %g", looks.Spent[0].Alpha, first.Report.Alpha, a1)
	}

	retest := l.request(headSHA, true)
	if got := l.doc(headSHA).Looks["quick"]; len(got.Spent) != 1 {
		t.Fatalf("the retest's request dropped the budget: %+v", got)
	}
	l.runAll()
	second := l.doc(headSHA)
	looks = second.Looks["quick"]
	if len(looks.Spent) != 2 || second.Report.Look() != 2 || math.Abs(second.Report.Alpha-(alpha-a1)) > 1e-12 || math.Abs(looks.SpentAlpha()-alpha) > 1e-12 {
		t.Fatalf("after the retest: looks %+v, report look %d α %g; want the second look at α − %g", looks, second.Report.Look(), second.Report.Alpha, a1)
	}
	if second.Report.CandidateRuns != 6 || second.Report.CandidateSessions != 2 {
		t.Errorf("retest judged %d runs from %d sessions, want 6 from 2 (one per job)", second.Report.CandidateRuns, second.Report.CandidateSessions)
	}
	if c := l.check(retest); !strings.Contains(c.Summary+c.Text, "look 2") {
		t.Errorf("the check does not say which look it was:\n%s\n%s", c.Summary, c.Text)
	}

	// Another commit: a fresh budget.
	l.request(newSHA, false)
	l.runAll()
	if got := l.doc(newSHA).Looks["quick"]; len(got.Spent) != 1 {
		t.Errorf("a new commit's budget: %+v, want one look", got)
	}
}

// Production judges with the repository's baselines as noise history,
// leaving out the one it compares with.
func TestJudgeUsesBaselineHistory(t *testing.T) {
	l := newLifecycle(t)
	tier, _ := config.Default().Tier("quick")
	for i, v := range []string{"v1", "v2", "v3"} {
		runs := scaled(1, 1.01, 0.99, 1.005, 0.995)
		for _, r := range runs {
			for k := range r.Metrics {
				r.Metrics[k] *= 1 + 0.003*float64(i)
			}
		}
		if _, _, err := baseline.Promote(l.ctx, l.st, runs, baseline.Meta{Repo: testRepo, Key: "quick", Version: v, Commit: headSHA, By: "t"}, tier); err != nil {
			t.Fatal(err)
		}
	}
	l.request(headSHA, false)
	l.runAll()
	rep := l.doc(headSHA).Report
	if rep == nil || rep.HistorySessions != 2 {
		t.Fatalf("history sessions = %+v, want 2 (the three baselines but the one compared with)", rep)
	}
}

// An inconclusive check on a needs_ack tier stays "action required" until
// a maintainer acknowledges it; the acknowledgement concludes it neutral
// and is in the audit log under the maintainer's name.
func TestNeedsAckUntilAcknowledged(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("tiers:\n  quick:\n    inconclusive: needs_ack\n"))
	l.baseline(1)
	id := l.request(headSHA, false)
	noisy := []float64{0.8, 1.0, 1.25}
	l.succeed(l.claim(), scaled(noisy...))
	// Inconclusive at first: perfgate adds runs once, then decides.
	cr := l.row(headSHA)
	if cr.State != store.CheckInProgress || len(cr.JobIDs) != 2 {
		t.Fatalf("after noisy runs: %s with %d jobs, want in progress with the added runs queued", cr.State, len(cr.JobIDs))
	}
	l.succeed(l.claim(), scaled(noisy...))
	c := l.check(id)
	if c.Conclusion != "action_required" || !strings.Contains(c.Title, "acknowledgement") || !strings.Contains(c.Summary, "/perf ack") {
		t.Fatalf("held inconclusive check: %s %q\n%s", c.Conclusion, c.Title, c.Summary)
	}
	if cr := l.row(headSHA); cr.State != store.CheckNeedsAck || len(l.doc(headSHA).Looks["quick"].Spent) != 2 {
		t.Errorf("row %s, looks %+v; want needs_ack after two looks", cr.State, l.doc(headSHA).Looks)
	}

	tiers, err := l.svc.Ack(l.ctx, request.Ack{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, By: "maintainer", Reason: "noisy week"})
	if err != nil || len(tiers) != 1 || tiers[0] != check.TierQuick {
		t.Fatalf("ack = %v, %v", tiers, err)
	}
	l.flush()
	c = l.check(id)
	if c.Conclusion != "neutral" || !strings.Contains(c.Summary+c.Text, "acknowledged by @maintainer") {
		t.Errorf("after the ack: %s\n%s", c.Conclusion, c.Summary)
	}
	audit, err := l.st.ListAudit(l.ctx, testRepo, 17)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range audit {
		if e.Action == "inconclusive.acknowledged" && e.Actor == "maintainer" && strings.Contains(string(e.Detail), "noisy week") {
			found = true
		}
	}
	if !found {
		t.Errorf("no inconclusive.acknowledged entry by the maintainer in %+v", audit)
	}
	if tiers, err := l.svc.Ack(l.ctx, request.Ack{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, By: "maintainer"}); err != nil || len(tiers) != 0 {
		t.Errorf("a second ack: %v, %v; want nothing to acknowledge", tiers, err)
	}
}

// The same noisy runs on a neutral tier (the quick default) pass as
// inconclusive at once: the policy, not the evidence, holds the check; the
// check says what settling spent and what would settle it.
func TestInconclusiveNeutralByDefault(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	id := l.request(headSHA, false)
	noisy := []float64{0.8, 1.0, 1.25}
	l.succeed(l.claim(), scaled(noisy...))
	l.succeed(l.claim(), scaled(noisy...))
	if c := l.check(id); c.Conclusion != "neutral" || l.row(headSHA).State != store.CheckInconclusive {
		t.Errorf("inconclusive under inconclusive: neutral: %s (%s)", c.Conclusion, l.row(headSHA).State)
	}
	if rep := l.doc(headSHA).Report; rep == nil || rep.Verdict != gate.Inconclusive {
		t.Errorf("report %+v, want inconclusive", rep)
	}
	if c := l.check(id); !strings.Contains(c.Summary, "settling spent 3 of 5 GPU-minutes") || !strings.Contains(c.Summary, "6 more runs (about 6 GPU-minutes)") {
		t.Errorf("the check does not say what settling spent and what would settle it:\n%s", c.Summary)
	}
}

// A merge queue's check of a merge group made from the pull request (its
// own SHA) is acknowledged by the pull request's /perf ack too.
func TestAckReachesTheMergeGroupCheck(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("tiers:\n  quick:\n    inconclusive: needs_ack\n"))
	l.baseline(1)
	id := l.request(newSHA, false) // the merge group's head: not the PR's
	noisy := []float64{0.8, 1.0, 1.25}
	l.succeed(l.claim(), scaled(noisy...))
	l.succeed(l.claim(), scaled(noisy...))
	if c := l.check(id); c.Conclusion != "action_required" {
		t.Fatalf("held check: %s", c.Conclusion)
	}
	tiers, err := l.svc.Ack(l.ctx, request.Ack{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, By: "maintainer"})
	if err != nil || len(tiers) != 1 {
		t.Fatalf("ack = %v, %v", tiers, err)
	}
	l.flush()
	if c := l.check(id); c.Conclusion != "neutral" {
		t.Errorf("merge group's check after the PR's ack: %s", c.Conclusion)
	}
}

// A runner without a real card spends CPU-minutes: the settle note says so.
func TestMinutesOfTheRunner(t *testing.T) {
	for _, tc := range []struct {
		env  *result.Environment
		want string
	}{
		{&result.Environment{GPUUUID: "GPU-1", GPUName: "NVIDIA H100 80GB HBM3"}, "GPU-minutes"},
		{&result.Environment{GPUUUID: "GPU-1", GPUName: "NVIDIA H100 80GB HBM3 (fake)", FakeGPU: true}, "CPU-minutes"},
		{&result.Environment{Sim: true}, "CPU-minutes"},
		{&result.Environment{}, "CPU-minutes"},
		{nil, "CPU-minutes"},
	} {
		if got := minutesOf(tc.env); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.env, got, tc.want)
		}
	}
}
