package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// testRunningQueuedChecks: the start sync reads the running jobs whose
// check still shows queued, and only those.
func testRunningQueuedChecks(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	sha := sha40("5")
	cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", PRNumber: 7, InstallationID: 42,
		State: store.CheckQueued, AddJobs: []store.JobSpec{{Repo: "acme/llm", Tier: "quick", HeadSHA: sha, PRNumber: 7}}})
	if err != nil || !ok {
		t.Fatalf("apply check: %v %v", ok, err)
	}
	other := e.enqueue(t, store.JobSpec{Repo: "acme/other"}) // no check run
	list := func() []int64 {
		t.Helper()
		ids, err := e.st.RunningQueuedChecks(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("nothing runs yet: %v", got)
	}
	var mine store.Job
	for range 2 {
		j, err := e.st.Claim(e.ctx, store.ClaimRequest{Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if j.ID != other.ID {
			mine = j
		}
	}
	if got := list(); !slices.Equal(got, []int64{mine.ID}) {
		t.Fatalf("running under a queued check: %v, want [%d]", got, mine.ID)
	}
	if _, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, FromGeneration: cr.Generation,
		Repo: "acme/llm", HeadSHA: sha, Tier: "quick", State: store.CheckInProgress}); err != nil || !ok {
		t.Fatalf("start the check: %v %v", ok, err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("after the check started: %v", got)
	}
}
