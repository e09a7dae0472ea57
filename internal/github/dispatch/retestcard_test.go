package dispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// testCard is the card verifiedRuns report: a retest is pinned to it.
const testCard = "GPU-5f3e2d1c-0b9a-8f7e-6d5c-4b3a2f1e0d9c"

// A retest pinned to a card that is gone gets the bisect's grace; past it
// the retest's job is cancelled, the PR is told the card, since when and
// the ways on, and the check ends — a warning keeps its clock, a check
// with nothing held ends inconclusive. On the injected clock.
func TestRetestOnAGoneCard(t *testing.T) {
	grace := bisectjob.DefaultCardGrace
	for _, tc := range []struct {
		name string
		// regress: the run before the retest found a regression (the
		// check is warned, with a deadline).
		regress bool
		// box: a runner offering the card is registered; drained or
		// silent from the retest on, or back within the grace.
		box, drained, silent, back bool
		stopped                    bool
		why                        string
		conclusion, title          string
	}{
		{name: "no runner offers the card", regress: true, stopped: true, why: "no registered runner offers it",
			conclusion: "neutral"},
		{name: "its runner is drained", regress: true, box: true, drained: true, stopped: true, why: "runner gpu-box is drained",
			conclusion: "neutral"},
		{name: "its runner went silent", regress: true, box: true, silent: true, stopped: true, why: "runner gpu-box last called in at",
			conclusion: "neutral"},
		{name: "drained, back within the grace", regress: true, box: true, drained: true, back: true},
		{name: "nothing held: inconclusive", box: true, drained: true, stopped: true, why: "runner gpu-box is drained",
			conclusion: "neutral", title: "Retest stopped: card " + testCard + " is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			if tc.regress {
				l.baseline(1.3)
			} else {
				l.baseline(1)
			}
			l.request(headSHA, false)
			runAllOnCard(l, testCard)
			before := l.row(headSHA)
			if tc.regress != !before.Deadline.IsZero() {
				t.Fatalf("first run: state %s, deadline %v", before.State, before.Deadline)
			}
			var box store.Agent
			if tc.box {
				var err error
				box, err = l.st.RegisterAgent(l.ctx, store.AgentRegistration{Name: "gpu-box", Labels: []string{"gpu"},
					GPUUUIDs: []string{testCard}, TokenHash: store.HashToken("box")})
				if err != nil {
					t.Fatal(err)
				}
			}
			retest := l.request(headSHA, true)
			row := l.row(headSHA)
			job, err := l.st.GetJob(l.ctx, row.JobIDs[len(row.JobIDs)-1])
			if err != nil || job.GPUUUID != testCard || job.Status != jobstate.Queued {
				t.Fatalf("retest job %d: %s, pinned to %q (%v): want queued, pinned to %s", job.ID, job.Status, job.GPUUUID, err, testCard)
			}
			if tc.drained {
				if _, err := l.st.SetAgentDrained(l.ctx, box.Name, true); err != nil {
					t.Fatal(err)
				}
			}
			keepAlive := func() {
				if tc.box && !tc.silent {
					// The box polls (with labels no job asks for, so it
					// claims nothing): it is seen.
					_, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: box.ID, Labels: []string{"probe"}, Lease: time.Minute})
					if !errors.Is(err, store.ErrNoJob) {
						t.Fatalf("poll: %v", err)
					}
				}
			}
			pass := func() {
				t.Helper()
				keepAlive()
				if err := l.svc.UpdateQueueNotes(l.ctx); err != nil {
					t.Fatal(err)
				}
				l.flush()
			}
			comments := len(l.gh.Comments())
			pass() // the card is first missed now
			l.clock.add(grace / 2)
			if tc.back {
				if _, err := l.st.SetAgentDrained(l.ctx, box.Name, false); err != nil {
					t.Fatal(err)
				}
			}
			pass()
			if j, _ := l.st.GetJob(l.ctx, job.ID); j.Status != jobstate.Queued {
				t.Fatalf("within the grace the retest job is %s", j.Status)
			}
			l.clock.add(grace/2 + time.Minute)
			pass()
			j, err := l.st.GetJob(l.ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			after := l.row(headSHA)
			if !tc.stopped {
				if j.Status != jobstate.Queued || len(l.gh.Comments()) != comments {
					t.Errorf("card back within the grace: job %s, %d new comments", j.Status, len(l.gh.Comments())-comments)
				}
				return
			}
			if j.Status != jobstate.Cancelled {
				t.Errorf("past the grace the retest job is %s, want cancelled", j.Status)
			}
			c := l.check(retest)
			if c.Status != "completed" || c.Conclusion != tc.conclusion {
				t.Errorf("retest check %s/%s, want completed/%s", c.Status, c.Conclusion, tc.conclusion)
			}
			if tc.title != "" && c.Title != tc.title {
				t.Errorf("title %q, want %q", c.Title, tc.title)
			}
			if tc.regress && (after.State != before.State || !after.Deadline.Equal(before.Deadline)) {
				t.Errorf("after the stop: %s, deadline %v; want %s with the deadline %v kept", after.State, after.Deadline, before.State, before.Deadline)
			}
			got := l.gh.Comments()[comments:]
			if len(got) != 1 {
				t.Fatalf("%d comments, want 1", len(got))
			}
			for _, want := range []string{"retest stopped", testCard, "gone since", tc.why, "/perf retest quick", "push a new commit"} {
				if !strings.Contains(got[0].Body, want) {
					t.Errorf("comment lacks %q:\n%s", want, got[0].Body)
				}
			}
			// A later pass says nothing more.
			l.clock.add(time.Hour)
			pass()
			if n := len(l.gh.Comments()) - comments; n != 1 {
				t.Errorf("%d comments after another pass, want 1", n)
			}
		})
	}
}

// runAllOnCard runs every queued job as runAll does, its results reported
// from card.
func runAllOnCard(l *lifecycle, card string) {
	l.t.Helper()
	for {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			return
		}
		if err != nil {
			l.t.Fatal(err)
		}
		for i, r := range quickRuns(3) {
			full, _ := json.Marshal(r)
			if _, _, err := l.st.PutResult(l.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprintf("c%d", i),
				RunIndex: i, Kind: jobstate.KindMeasured, GPUUUID: card, Summary: full, Samples: full}); err != nil {
				l.t.Fatal(err)
			}
		}
		if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
			l.t.Fatal(err)
		}
		l.judge()
	}
}
