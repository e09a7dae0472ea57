package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// prJSON is GET /repos/acme/inference/pulls/17 in the given state.
func prJSON(state string) []byte {
	return []byte(fmt.Sprintf(`{"number":17,"state":%q,"user":{"login":"octocat"},"head":{"sha":%q},"base":{"sha":%q,"ref":"main"}}`, state, headSHA, headSHA))
}

// A closed PR never warns, escalates or pings its author, whatever order
// perfgate saw its deliveries in:
//   - the opened-after-closed race: "opened" failed (GitHub 502s), "closed"
//     was processed, then the retried "opened" queued work for the closed
//     PR and its regression would have warned;
//   - a PR warned while open, closed before its deadline, whose "closed"
//     delivery perfgate has not processed (lost, or still retrying).
func TestClosedPRNeverPings(t *testing.T) {
	tests := []struct {
		name string
		run  func(l *lifecycle) int64 // drives the PR, returns the check's GitHub ID
		// want is the check's conclusion: cancelled when the PR closed
		// before the verdict, the warning's neutral when after.
		want     string
		comments int
	}{
		{"opened retried after closed", func(l *lifecycle) int64 {
			l.gh.SetPullRequest("acme/inference", 17, prJSON("closed"))
			if err := l.svc.Close(l.ctx, testRepo, 17, "octocat"); err != nil {
				l.t.Fatal(err)
			}
			id := l.request(headSHA, false) // the stale "opened", retried
			l.runAll()
			return id
		}, "cancelled", 0},
		{"closed delivery not yet processed at the deadline", func(l *lifecycle) int64 {
			l.gh.SetPullRequest("acme/inference", 17, prJSON("open"))
			id := l.request(headSHA, false)
			l.runAll()
			if cs := l.gh.Comments(); len(cs) != 1 {
				l.t.Fatalf("%d comments while open, want the one warning", len(cs))
			}
			l.gh.SetPullRequest("acme/inference", 17, prJSON("closed"))
			return id
		}, "neutral", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLifecycle(t)
			l.baseline(1.3)
			id := tt.run(l)
			before := len(l.gh.Comments())
			l.clock.add(49 * time.Hour)
			if err := l.svc.Escalate(l.ctx); err != nil {
				t.Fatal(err)
			}
			l.flush()
			for _, c := range l.gh.Comments()[before:] {
				t.Errorf("a closed PR was commented on:\n%s", c.Body)
			}
			if n := len(l.gh.Comments()); n != tt.comments {
				t.Errorf("%d comments, want %d", n, tt.comments)
			}
			if c := l.check(id); c.Conclusion != tt.want {
				t.Errorf("check on the closed PR concluded %s, want %s\n%s", c.Conclusion, tt.want, c.Summary)
			}
			if row := l.row(headSHA); row.State == store.CheckEscalated || !row.Deadline.IsZero() {
				t.Errorf("row %s with deadline %v: a closed PR keeps no clock", row.State, row.Deadline)
			}
		})
	}
}

// A warning comment already queued when the PR closes is dropped by the
// outbox, which asks GitHub at the moment it sends.
func TestQueuedWarningDroppedOnClosedPR(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	l.gh.SetPullRequest("acme/inference", 17, prJSON("open"))
	l.request(headSHA, false)
	j := l.claim()
	for i, r := range quickRuns(3) {
		upload(t, l.st, j, i, r)
	}
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.svc.JudgePass(l.ctx); err != nil {
		t.Fatal(err)
	}
	l.gh.SetPullRequest("acme/inference", 17, prJSON("closed")) // closed before the outbox sends
	l.flush()
	if cs := l.gh.Comments(); len(cs) != 0 {
		t.Errorf("the warning was posted on a closed PR:\n%s", cs[0].Body)
	}
}

// failingApply is the store with every check-run step refused, so judging
// fails and so does concluding the check with the reason.
type failingApply struct{ store.Store }

func (failingApply) ApplyCheck(context.Context, store.CheckChange) (store.CheckRun, bool, error) {
	return store.CheckRun{}, false, errors.New("disk full")
}

// Reconcile reports a check it could neither judge nor conclude (the
// judging error used to be dropped), so the operator sees it in the log.
func TestReconcileReportsWhatItCannotConclude(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	l.request(headSHA, false)
	l.runAll()
	cr := l.row(headSHA)
	if _, err := l.st.TransitionCheckRun(l.ctx, cr.ID, cr.State, store.CheckTransition{State: store.CheckInProgress}); err != nil {
		t.Fatal(err)
	}
	l.svc.st = failingApply{l.st}
	err := l.svc.Reconcile(l.ctx)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Reconcile = %v, want the failure to judge and conclude", err)
	}
}
