package dispatch

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// A closed PR: its queued jobs are cancelled and running ones told to stop,
// its open check concluded cancelled ("PR closed"), a warned commit's clock
// stopped — no escalation, no comment to its author afterwards — and a late
// result changes nothing. Reopening it measures it again.
func TestClosedPRStopsEverything(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	warned := l.request(newSHA, false)
	l.runAll()
	if c := l.check(warned); c.Conclusion != "neutral" {
		t.Fatalf("setup: %s", c.Conclusion)
	}
	open := l.request(headSHA, false)
	running := l.claim()
	comments := len(l.gh.Comments())

	if err := l.svc.Close(l.ctx, testRepo, 17, "octocat"); err != nil {
		t.Fatal(err)
	}
	l.flush()
	c := l.check(open)
	if c.Status != "completed" || c.Conclusion != "cancelled" || c.Title != "PR closed" {
		t.Errorf("open check after close: %s/%s %q, want completed/cancelled \"PR closed\"", c.Status, c.Conclusion, c.Title)
	}
	if j, _ := l.st.GetJob(l.ctx, running.ID); !j.CancelRequested {
		t.Error("the running job was not told to stop")
	}
	if cr := l.row(newSHA); !cr.Deadline.IsZero() || cr.State != store.CheckWarned {
		t.Errorf("warned commit after close: %s deadline %v, want warned with no clock", cr.State, cr.Deadline)
	}
	// The agent finishes anyway; two days pass.
	l.succeed(running, quickRuns(3))
	l.clock.add(72 * time.Hour)
	if err := l.svc.Escalate(l.ctx); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if c := l.check(open); c.Conclusion != "cancelled" {
		t.Errorf("a late result reopened the closed PR's check: %s", c.Conclusion)
	}
	if c := l.check(warned); c.Conclusion != "neutral" {
		t.Errorf("a closed PR's warning escalated: %s", c.Conclusion)
	}
	if n := len(l.gh.Comments()) - comments; n != 0 {
		t.Errorf("%d comment(s) on a closed PR", n)
	}
	// Reopened: measured again, on a new check run.
	again := l.request(headSHA, false)
	if again == open || l.check(again).Status != "queued" {
		t.Errorf("reopened PR: check %d (%s), want a new queued check", again, l.check(again).Status)
	}
}

// A result that cannot be judged ({} was accepted by the results API)
// concludes the check with a message that says why, instead of leaving it
// queued.
func TestUnjudgeableResultConcludesWithReason(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	id := l.request(headSHA, false)
	j := l.claim()
	for i := range 3 {
		if _, _, err := l.st.PutResult(l.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: string(rune('a' + i)),
			RunIndex: i, Kind: jobstate.KindMeasured, Summary: []byte(`{}`), Samples: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	l.judge()
	c := l.check(id)
	if c.Status != "completed" || c.Conclusion != "neutral" {
		t.Errorf("check after {} results: %s/%s, want completed/neutral", c.Status, c.Conclusion)
	}
	if !strings.Contains(c.Summary+c.Text, "cannot be judged") || !strings.Contains(c.Summary+c.Text, "not a benchmark result") {
		t.Errorf("the check does not say why:\n%s\n%s", c.Summary, c.Text)
	}
}

// Judging runs from the store, not from the agent's finish request: a job
// that finished while no server judged it (a crash right after the finish)
// is judged after a restart.
func TestFinishedJobJudgedAfterRestart(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	id := l.request(headSHA, false)
	j := l.claim()
	for i, r := range quickRuns(3) {
		upload(t, l.st, j, i, r)
	}
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	l.restart() // nothing judged it before the "crash"
	l.judge()
	if c := l.check(id); c.Conclusion != "success" {
		t.Errorf("after the restart: %s/%s, want success", c.Status, c.Conclusion)
	}
}

// The final write of a verdict that GitHub refuses five times (502) is
// retried until it sticks, and the check shows the verdict exactly once.
func TestFinalPatchRetriedUntilItSticks(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	id := l.request(headSHA, false)
	j := l.claim()
	patch := "/repos/acme/inference/check-runs/" + strconv.FormatInt(id, 10)
	l.gh.FailNext("PATCH", patch, 5, http.StatusBadGateway, nil)
	l.succeed(j, quickRuns(3))
	c := l.check(id)
	if c.Status != "completed" || c.Conclusion != "success" {
		t.Fatalf("after 5 failed PATCHes: %s/%s, want completed/success", c.Status, c.Conclusion)
	}
	var failed, ok int
	for _, r := range l.gh.RequestsTo("PATCH", patch) {
		switch r.Status {
		case http.StatusBadGateway:
			failed++
		case http.StatusOK:
			ok++
		}
	}
	if failed != 5 || ok != 1 {
		t.Errorf("PATCHes: %d failed, %d ok; want 5 and then 1", failed, ok)
	}
}

// The reconciler concludes an open check whose jobs all ended and were
// judged but whose verdict was lost (here: written away by hand).
func TestReconcileConcludesAStrandedCheck(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	id := l.request(headSHA, false)
	l.runAll()
	// Strand it: put the row back to in_progress as if the verdict was lost.
	cr := l.row(headSHA)
	if _, err := l.st.TransitionCheckRun(l.ctx, cr.ID, cr.State, store.CheckTransition{State: store.CheckInProgress}); err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Reconcile(l.ctx); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if row := l.row(headSHA); row.State != store.CheckPassed {
		t.Errorf("after reconcile: %s, want passed", row.State)
	}
	if c := l.check(id); c.Conclusion != "success" {
		t.Errorf("check after reconcile: %s", c.Conclusion)
	}
}

// Each check run links to its own dashboard page when Details is set, and
// to the one public URL otherwise.
func TestDetailsLinkPerCheckRun(t *testing.T) {
	l := newLifecycle(t)
	l.svc.detailsURL = "https://perfgate.example"
	l.request(headSHA, false)
	l.svc.details = func(repo, sha string, tier check.Tier) string {
		return "https://perfgate.example/r/" + repo + "/checks/" + sha + "/" + string(tier) + "?access=x"
	}
	l.request(newSHA, false)
	reqs := l.gh.RequestsTo("POST", "/repos/acme/inference/check-runs")
	want := []string{"https://perfgate.example", "https://perfgate.example/r/acme/inference/checks/" + newSHA + "/quick?access=x"}
	if len(reqs) != 2 {
		t.Fatalf("%d check runs created", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Body["details_url"]; got != want[i] {
			t.Errorf("check run %d details_url = %v, want %s", i, got, want[i])
		}
	}
}
