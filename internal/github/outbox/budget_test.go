package outbox

import (
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
)

// When GitHub says an installation's budget is spent (a verdict's call
// answered 403 with X-RateLimit-Remaining: 0), a queue note due meanwhile
// is not sent — no call spends what is left — but waits for the reset
// GitHub named, and is sent after it.
func TestQueueNoteWaitsForTheRateLimitReset(t *testing.T) {
	e := newEnvPolicy(t, app.RetryPolicy{MaxAttempts: 1, MaxRateLimitWait: time.Second})
	reset := e.clock.now().Add(10 * time.Minute).Truncate(time.Second)
	const path = "/repos/acme/inference/check-runs"
	e.gh.RateLimitNext("POST", path, 1, reset)
	e.newCheck(store.CheckWarned, "completed", "neutral") // the verdict: refused, retried later
	if n := e.pass(); n != 1 || len(e.gh.RequestsTo("POST", path)) != 1 {
		t.Fatalf("first pass handled %d writes, %d calls", n, len(e.gh.RequestsTo("POST", path)))
	}
	note, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/inference", HeadSHA: "1111111111111111111111111111111111111111", Tier: "quick",
		PRNumber: 18, InstallationID: githubtest.InstallationID, State: store.CheckQueued,
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued", Title: "queued", Summary: "3 jobs ahead"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.pass(); n != 1 {
		t.Fatalf("second pass handled %d writes, want the note", n)
	}
	if calls := len(e.gh.RequestsTo("POST", path)); calls != 1 {
		t.Errorf("the queue note was sent with the budget spent: %d calls, want 1", calls)
	}
	eff, err := e.st.GetEffect(e.ctx, store.CheckSyncKey(note.ID))
	// The transport waits one second past the reset: that second may
	// still be limited.
	if err != nil || eff.NextAttemptAt.Before(reset) || eff.NextAttemptAt.After(reset.Add(time.Second)) {
		t.Fatalf("the note's next attempt is %v (%v), want the reset %v", eff.NextAttemptAt, err, reset)
	}
	e.clock.add(11 * time.Minute)
	for range 2 {
		e.pass()
	}
	if calls := len(e.gh.RequestsTo("POST", path)); calls != 3 {
		t.Errorf("after the reset %d calls, want 3 (the verdict again, the note)", calls)
	}
	if runs := e.gh.CheckRuns(); len(runs) != 2 {
		t.Errorf("%d check runs on GitHub after the reset, want the verdict and the note", len(runs))
	}
}
