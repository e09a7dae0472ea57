package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// simRunner is one runner on the test clock: it calls in every beat (the
// agent's heartbeat), stops a job whose cancel was requested at that call,
// finishes a job after measure, and claims the next job when idle. It
// records when each job it ran started and ended.
type simRunner struct {
	l              *lifecycle
	beat, measure  time.Duration
	job            *store.Job
	started, ended map[int64]time.Time
}

func newSimRunner(l *lifecycle, beat, measure time.Duration) *simRunner {
	return &simRunner{l: l, beat: beat, measure: measure, started: map[int64]time.Time{}, ended: map[int64]time.Time{}}
}

// tick is the runner's call at now, a beat after its last.
func (r *simRunner) tick(now time.Time) {
	l := r.l
	l.t.Helper()
	l.clock.add(now.Sub(l.clock.now()))
	if r.job == nil {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Hour})
		if errors.Is(err, store.ErrNoJob) {
			return
		}
		if err != nil {
			l.t.Fatal(err)
		}
		r.job, r.started[j.ID] = &j, now
		return
	}
	j := *r.job
	cancel, err := l.st.Heartbeat(l.ctx, j.ID, j.LeaseID, time.Hour)
	if err != nil {
		l.t.Fatal(err)
	}
	switch {
	case cancel:
		if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Cancelled, "cancelled by the server"); err != nil {
			l.t.Fatal(err)
		}
		l.judge()
	case now.Sub(r.started[j.ID]) >= r.measure:
		l.succeed(j, quickRuns(3))
	default:
		return
	}
	r.job, r.ended[j.ID] = nil, now
}

// An unchanged commit asked for again (opened after a retried delivery,
// ready_for_review, reopened, `/perf retest`, GitHub's re-run of the check
// and of the suite) gets a new check run that replaces the old one, and
// the old run's jobs stop with it: a queued one at once (never claimed), a
// running one at the runner's next call. The runner spends no time on a
// replaced run beyond that one beat; before the rule, each replaced run
// measured for its whole 10 minutes.
func TestReplacedRunStopsItsJobs(t *testing.T) {
	const (
		beat    = 3 * time.Second  // the runner's cancel poll (agent.DefaultCancelPoll): the cancel latency
		measure = 10 * time.Minute // one job of the quick tier
	)
	l := newLifecycle(t)
	l.baseline(1)
	r := newSimRunner(l, beat, measure)
	start := l.clock.now()
	// Each request lands at its time, between two beats of the runner:
	// the job of the run it replaces is running (R) or still queued (Q): a
	// request a third of a beat after another finds the runner still busy
	// (or not yet called in), so the job the first queued is still queued.
	events := []struct {
		at       time.Duration
		trigger  string
		confirm  bool
		replaces string // what the replaced run's job is doing: R, Q, or "" (nothing open)
	}{
		{0, "pull_request.opened", false, ""},
		{2 * time.Minute, "pull_request.ready_for_review", false, "R"},
		{2*time.Minute + beat/3, "pull_request.reopened", false, "Q"},
		{5 * time.Minute, "/perf retest", true, "R"},
		{17 * time.Minute, "check_run.rerequested", true, ""},
		{17*time.Minute + beat/3, "check_suite.rerequested", true, "Q"},
	}
	replacedAt := map[int64]time.Time{} // a replaced run's job → when its run was replaced
	var ids []int64                     // GitHub check run of each request
	next := 0
	for call := start.Add(beat); call.Sub(start) < 40*time.Minute; call = call.Add(beat) {
		for next < len(events) && start.Add(events[next].at).Before(call) {
			ev := events[next]
			next++
			l.clock.add(start.Add(ev.at).Sub(l.clock.now()))
			var before []int64
			if cr, err := l.st.GetCheckRun(l.ctx, testRepo, headSHA, "quick"); err == nil {
				before = cr.JobIDs
			}
			if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
				HeadSHA: headSHA, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierQuick, Trigger: ev.trigger, Confirm: ev.confirm,
				Author: "octocat", DeliveryID: fmt.Sprintf("d-%d", next)}); err != nil {
				t.Fatal(err)
			}
			l.flush()
			after := l.row(headSHA)
			ids = append(ids, after.GitHubID)
			for _, id := range before {
				if slices.Contains(after.JobIDs, id) {
					continue // an ended job a retest keeps as evidence
				}
				replacedAt[id] = l.clock.now()
				j, err := l.st.GetJob(l.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case ev.replaces == "Q" && (j.Status != jobstate.Cancelled || j.Attempts != 0):
					t.Errorf("%s: the replaced run's queued job %d is %s after %d attempts, want cancelled before it ran", ev.trigger, id, j.Status, j.Attempts)
				case ev.replaces == "R" && (j.Status != jobstate.Running || !j.CancelRequested):
					t.Errorf("%s: the replaced run's running job %d is %s (cancel requested %v), want running and told to stop", ev.trigger, id, j.Status, j.CancelRequested)
				case ev.replaces == "":
					t.Errorf("%s: job %d of a settled run was dropped (%s)", ev.trigger, id, j.Status)
				}
			}
		}
		r.tick(call)
	}

	// Runner time a replaced run got after it was replaced: at most one
	// beat each, and none for a job that was queued.
	var beyond, total time.Duration
	for id, at := range replacedAt {
		began, ran := r.started[id]
		if !ran {
			continue
		}
		end, ok := r.ended[id]
		if !ok {
			t.Errorf("job %d of a replaced run is still running after %v", id, l.clock.now().Sub(at))
			continue
		}
		if began.After(at) {
			t.Errorf("job %d of a replaced run started %v after its run was replaced", id, began.Sub(at))
			at = began
		}
		spent := end.Sub(at)
		total += spent
		beyond += max(0, spent-beat)
	}
	t.Logf("%d jobs of replaced runs; runner time after their replacement: %v in all, %v beyond the %v cancel latency", len(replacedAt), total, beyond, beat)
	if len(replacedAt) != 4 {
		t.Errorf("%d jobs replaced, want 4 (two running, two queued)", len(replacedAt))
	}
	if beyond != 0 {
		t.Errorf("the runner spent %v on replaced runs beyond the %v cancel latency", beyond, beat)
	}
	final := l.row(headSHA)
	if final.State != store.CheckPassed || len(final.JobIDs) != 2 {
		t.Errorf("final check: %s with jobs %v, want passed on the retest's kept job and its own", final.State, final.JobIDs)
	}
	for i, id := range ids[:len(ids)-1] {
		if c := l.check(id); c.Status != "completed" {
			t.Errorf("GitHub check run of %s left %s", events[i].trigger, c.Status)
		}
	}
	if c := l.check(ids[len(ids)-1]); c.Conclusion != "success" {
		t.Errorf("the last run: %s/%s %q, want success", c.Status, c.Conclusion, c.Title)
	}
}

// A long run (capacity, soak) holds a card for tens of minutes to hours: a
// re-run of the same commit stops the one it replaces as a quick run does,
// and the stopped job's end leaves the new run open.
func TestReplacedLongRunStops(t *testing.T) {
	l, _ := longRunLifecycle(t)
	ask := func(delivery string) store.CheckRun {
		t.Helper()
		if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
			HeadSHA: newSHA, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierCapacity, Trigger: "check_run.rerequested",
			Author: "octocat", DeliveryID: delivery}); err != nil {
			t.Fatal(err)
		}
		l.flush()
		cr, err := l.st.GetCheckRun(l.ctx, testRepo, newSHA, string(check.TierCapacity))
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	first := ask("d-1")
	old := l.start()
	second := ask("d-2")
	if j, err := l.st.GetJob(l.ctx, old.ID); err != nil || !j.CancelRequested {
		t.Fatalf("the replaced capacity job: %s, cancel requested %v (%v); want it told to stop", j.Status, j.CancelRequested, err)
	}
	if len(second.JobIDs) != 1 || second.JobIDs[0] == old.ID || second.Generation != first.Generation+1 {
		t.Fatalf("the new run: jobs %v generation %d, want one new job on generation %d", second.JobIDs, second.Generation, first.Generation+1)
	}
	if _, err := l.st.Finish(l.ctx, old.ID, old.LeaseID, jobstate.Cancelled, "cancelled by the server"); err != nil {
		t.Fatal(err)
	}
	l.judge()
	if cr, err := l.st.GetCheckRun(l.ctx, testRepo, newSHA, string(check.TierCapacity)); err != nil || cr.State != store.CheckQueued {
		t.Errorf("after the replaced job ended the new run is %s (%v), want still queued", cr.State, err)
	}
}
