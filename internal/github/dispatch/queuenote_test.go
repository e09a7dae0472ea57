package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// The queued check says where it stands and how long it should wait, on
// GitHub through the outbox, and follows the queue as it moves: only when
// the text changes, at most once a minute, and when only the figures
// changed at most once in five minutes.
func TestQueuedCheckShowsPositionAndEstimate(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	// Three jobs of the repository's other pull requests are queued first
	// (another repository's would share the runner with it instead).
	for pr := range 3 {
		if _, err := l.st.Enqueue(l.ctx, store.JobSpec{Repo: testRepo, Tier: "quick", PRNumber: pr + 1, HeadSHA: sha(pr), Labels: []string{"gpu"}}); err != nil {
			t.Fatal(err)
		}
	}
	id := l.request(headSHA, false)
	updates := func() int {
		n := 0
		for _, r := range l.gh.RequestsTo("PATCH", fmt.Sprintf("/repos/acme/inference/check-runs/%d", id)) {
			if r.Status == 200 {
				n++
			}
		}
		return n
	}
	note := func() githubtest.CheckRun {
		t.Helper()
		if err := l.svc.UpdateQueueNotes(l.ctx); err != nil {
			t.Fatal(err)
		}
		l.flush()
		return l.check(id)
	}
	// One idle runner, no history: quick jobs take the default 10 minutes
	// on average, as uncertain as an exponential's: three of them are
	// ahead, the range is wide.
	c := note()
	if c.Status != "queued" || c.Title != "Queued: 3 ahead, about 7 min–1 h 20 min" {
		t.Fatalf("queued check = %s %q, want 3 ahead, about 7 min–1 h 20 min", c.Status, c.Title)
	}
	if !strings.Contains(c.Summary, "3 jobs are ahead of it for runners labelled `gpu`") || !strings.Contains(c.Summary, "about 10 min a job") {
		t.Errorf("summary = %q", c.Summary)
	}
	before := updates()
	// The runner takes one job: the check moves up, but not within the
	// minute.
	running := l.claim()
	if running.PRNumber != 1 {
		t.Fatalf("claimed PR %d's job first", running.PRNumber)
	}
	l.clock.add(30 * time.Second)
	if c := note(); c.Title != "Queued: 3 ahead, about 7 min–1 h 20 min" || updates() != before {
		t.Errorf("updated within the minute: %q (%d updates)", c.Title, updates()-before)
	}
	l.clock.add(31 * time.Second)
	if c := note(); c.Title != "Queued: 2 ahead, about 7 min–1 h 20 min" || updates() != before+1 {
		t.Errorf("after a minute: %q (%d updates), want 2 ahead, one update", c.Title, updates()-before)
	}
	// Nothing new to say: no write, however long.
	l.clock.add(61 * time.Second)
	if _, err := l.st.Heartbeat(l.ctx, running.ID, running.LeaseID, time.Minute); err != nil { // the runner is alive
		t.Fatal(err)
	}
	if note(); updates() != before+1 {
		t.Errorf("rewrote an unchanged note (%d updates)", updates()-before)
	}
	// Recent run times are learnt: jobs that take 4 minutes.
	l.clock.add(2 * time.Minute)
	if _, err := l.st.Heartbeat(l.ctx, running.ID, running.LeaseID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Finish(l.ctx, running.ID, running.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	// Only the figures move: the note holds them until five minutes
	// have passed since it was written.
	if c := note(); c.Title != "Queued: 2 ahead, about 7 min–1 h 20 min" || updates() != before+1 {
		t.Errorf("with a 4-minute history, 4 min after the last update: %q (%d updates), want it held", c.Title, updates()-before)
	}
	l.clock.add(2 * time.Minute) // 5 min since the last update; the runner was seen 2 min ago

	if c := note(); c.Title != "Queued: 2 ahead, about 8 min" || updates() != before+2 {
		t.Errorf("with a 4-minute history: %q (%d updates), want 2 ahead, about 8 min", c.Title, updates()-before)
	}
	// The only runner is drained: the check says it waits for one.
	if _, err := l.st.SetAgentDrained(l.ctx, "runner", true); err != nil {
		t.Fatal(err)
	}
	l.clock.add(time.Minute)
	if c := note(); c.Title != "Queued: 2 ahead, waiting for a runner labelled gpu (none is online and undrained)" {
		t.Errorf("drained runner: %q", c.Title)
	}
	// Once a runner starts it, the queue note is gone.
	if _, err := l.st.SetAgentDrained(l.ctx, "runner", false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		j := l.claim()
		if j.PRNumber == 17 {
			if err := l.svc.SyncStarted(l.ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
			t.Fatal(err)
		}
	}
	c = note()
	if c.Status != "in_progress" || strings.HasPrefix(c.Title, "Queued") {
		t.Errorf("started check = %s %q", c.Status, c.Title)
	}
	if got := strings.Join(c.Statuses, ","); strings.Count(got, "completed") != 0 {
		t.Errorf("statuses %s", got)
	}
}

func sha(i int) string { return fmt.Sprintf("%040x", i+1) }

// A queue note is rewritten within the minute only when it says something
// new; other figures for the wait wait QueueRangeEvery.
func TestMaterialNote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		old, new string
		want     bool
	}{
		{"Queued: 3 ahead, about 7–35 min", "Queued: 3 ahead, about 10–40 min", false},
		{"Queued: 3 ahead, about 7–35 min", "Queued: 3 ahead, more than 48 h", false},
		{"Queued: 3 ahead, about 7–35 min", "Queued: 2 ahead, about 7–35 min", true},
		{"Queued: 1 ahead, under a minute", "Queued: next in line, starting now", true},
		{"Queued: 3 ahead, about 7–35 min", "Queued: 3 ahead, waiting for card GPU-1 (its runner is offline or drained)", true},
		{"Queued: 3 ahead, waiting for a runner (none is online)", "Queued: 3 ahead, about 7–35 min", true},
	} {
		if got := materialNote(c.old, c.new); got != c.want {
			t.Errorf("materialNote(%q, %q) = %v, want %v", c.old, c.new, got, c.want)
		}
	}
}
