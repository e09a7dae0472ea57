package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// TestBisectThroughTheServer: `/perf bisect` on an issue runs through the
// whole server — the webhook, the app, the Asker, the queue, the judge
// handing each finished bisect job to the Runner, the outbox — and the
// result names the commit that slowed the runs, on the issue. The runner
// here reports numbers instead of running an engine (the demo package's
// end-to-end test runs the sim).
func TestBisectThroughTheServer(t *testing.T) {
	l := newLoop(t)
	git := ghtest.NewGitRepo(t)
	good := git.Commit("perfgate config", map[string]string{config.DefaultPath: "# the defaults\n"})
	shas := git.Commits(12, func(i int) (string, map[string]string) {
		return fmt.Sprintf("change %d (#%d)", i+1, 100+i+1), map[string]string{"engine/knob": fmt.Sprint(i + 1)}
	})
	planted := shas[6] // change 7 (#107): it and every later commit are 20% slower
	slow := map[string]bool{}
	for _, sha := range shas[6:] {
		slow[sha] = true
	}
	l.gh.SetGitRepo(testRepo, git.Dir)
	l.gh.SetPermission(testRepo, "monalisa", "admin", "maintain")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := make(chan store.Job, 64)
	go func() {
		ag, err := l.st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("runner-token")})
		if err != nil {
			return
		}
		for n := 0; ctx.Err() == nil; {
			j, err := l.st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-one"}, Lease: time.Minute})
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			var plan agentapi.Plan
			if err := json.Unmarshal(j.Config, &plan); err != nil {
				return
			}
			// A bisect job interleaves its commit (head) with a
			// reference (base), ABBA.
			for _, sl := range plan.Schedule() {
				i := sl.RunIndex
				n++
				v := 10 * (1 + 0.003*float64(n%5))
				if slow[plan.Commit(sl.Side)] {
					v *= 1.2
				}
				raw, _ := json.Marshal(&result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": v}})
				if _, _, err := l.st.PutResult(ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprint(i), RunIndex: i, Side: sl.Side, Pair: sl.Pair,
					GPUUUID: "GPU-one", Kind: jobstate.KindMeasured, Summary: raw, Samples: raw}); err != nil {
					return
				}
			}
			if done, err := l.st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err == nil {
				jobs <- done
				l.srv.Dispatch().JobDone(ctx, done)
			}
		}
	}()

	var ev map[string]any
	if err := json.Unmarshal(ghtest.Fixture(t, "issue_comment/created.retest.json"), &ev); err != nil {
		t.Fatal(err)
	}
	issue, comment := ev["issue"].(map[string]any), ev["comment"].(map[string]any)
	delete(issue, "pull_request")
	issue["number"] = 9
	comment["body"] = "/perf bisect " + good[:8] + " main"
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if code := l.deliver("issue_comment", "bisect-1", body); code/100 != 2 {
		t.Fatalf("webhook: %d", code)
	}
	var started, report string
	waitUntil(t, "the bisect's report on the issue", func() bool {
		for _, c := range l.gh.Comments() {
			switch {
			case c.Number == 9 && strings.HasPrefix(c.Body, "@monalisa"):
				started = c.Body
			case c.Number == 9 && strings.HasPrefix(c.Body, "### perfgate bisect"):
				report = c.Body
			}
		}
		return report != ""
	})
	if !strings.Contains(started, "Bisect started: 12 commits after good") {
		t.Fatalf("reply %q", started)
	}
	for _, want := range []string{"**Culprit: [`" + planted[:7] + "`]", "change 7 (#107)", "| after job | commit |", "Bisect asked for by @monalisa"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	ran := 0
	for len(jobs) > 0 {
		j := <-jobs
		ran++
		if j.Kind != "bisect" || j.PRNumber != 0 {
			t.Errorf("job %d: kind %q, PR %d", j.ID, j.Kind, j.PRNumber)
		}
	}
	if runs := l.gh.CheckRuns(); len(runs) != 0 {
		t.Errorf("a bisect made check runs: %+v", runs)
	}
	t.Logf("%d GPU jobs", ran)
}

// TestBisectStopsWhenItsCardIsGone: a runner measures a bisect's first
// job on its card and then goes silent (its host is down); the next job,
// pinned to that card, would wait forever. Past the grace the server's
// resume pass stops the bisect, cancels the job and says so on the issue
// that asked — through the outbox, naming the card.
func TestBisectStopsWhenItsCardIsGone(t *testing.T) {
	l := newTunedLoop(t, func(c *LoopConfig) { c.BisectResumeEvery, c.BisectCardGrace = 50*time.Millisecond, time.Second })
	git := ghtest.NewGitRepo(t)
	good := git.Commit("perfgate config", map[string]string{config.DefaultPath: "# the defaults\n"})
	git.Commits(8, func(i int) (string, map[string]string) {
		return fmt.Sprintf("change %d", i+1), map[string]string{"engine/knob": fmt.Sprint(i + 1)}
	})
	l.gh.SetGitRepo(testRepo, git.Dir)
	l.gh.SetPermission(testRepo, "monalisa", "admin", "maintain")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// box-7 registers with its card, then falls silent (its host is down).
	// The jobs that are not pinned yet — the bisect's first, and a copy a
	// resume pass racing Start may queue — are measured "on GPU-one"
	// without box-7 calling in, so only the pinned job waits for it.
	if _, err := l.st.RegisterAgent(ctx, store.AgentRegistration{Name: "box-7", Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-one"},
		TokenHash: store.HashToken("runner-token")}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			j, err := l.st.Claim(ctx, store.ClaimRequest{Labels: []string{"gpu"}, Lease: time.Minute})
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			var plan agentapi.Plan
			if err := json.Unmarshal(j.Config, &plan); err != nil {
				return
			}
			for _, sl := range plan.Schedule() {
				i := sl.RunIndex
				raw, _ := json.Marshal(&result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": 10 + 0.01*float64(i)}})
				if _, _, err := l.st.PutResult(ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprint(i), RunIndex: i, Side: sl.Side, Pair: sl.Pair,
					GPUUUID: "GPU-one", Kind: jobstate.KindMeasured, Summary: raw, Samples: raw}); err != nil {
					return
				}
			}
			if done, err := l.st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err == nil {
				l.srv.Dispatch().JobDone(ctx, done)
			}
		}
	}()

	var ev map[string]any
	if err := json.Unmarshal(ghtest.Fixture(t, "issue_comment/created.retest.json"), &ev); err != nil {
		t.Fatal(err)
	}
	issue, comment := ev["issue"].(map[string]any), ev["comment"].(map[string]any)
	delete(issue, "pull_request")
	issue["number"] = 9
	comment["body"] = "/perf bisect " + good[:8] + " main"
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if code := l.deliver("issue_comment", "bisect-gone-1", body); code/100 != 2 {
		t.Fatalf("webhook: %d", code)
	}
	var stopped string
	waitUntil(t, "a comment saying the bisect stopped", func() bool {
		for _, c := range l.gh.Comments() {
			if c.Number == 9 && strings.HasPrefix(c.Body, "### perfgate bisect stopped") {
				stopped = c.Body
			}
		}
		return stopped != ""
	})
	for _, want := range []string{"card `GPU-one`", "runner box-7 last called in", "does not move a bisect to another card",
		"/perf bisect " + good[:7], "Bisect asked for by @monalisa"} {
		if !strings.Contains(stopped, want) {
			t.Errorf("stopped comment lacks %q:\n%s", want, stopped)
		}
	}
	bs, err := l.st.ListBisects(ctx, store.BisectFilter{Repo: testRepo})
	if err != nil || len(bs) != 1 || bs[0].Status != store.BisectFailed || bs[0].JobID != 0 {
		t.Fatalf("bisects %+v, %v; want one, failed, waiting for no job", bs, err)
	}
	queue, err := l.st.ListQueue(ctx)
	if err != nil || len(queue) != 0 {
		t.Errorf("queue after the stop: %+v, %v; want the pinned job cancelled", queue, err)
	}
	// Every pinned job is on the card and cancelled; the one the bisect
	// waited for says why. (A resume pass every 50 ms races Start and
	// JobDone, so a copy the bisect "moved on without" may be there too.)
	stoppedJobs := 0
	for id := int64(1); ; id++ {
		j, err := l.st.GetJob(ctx, id)
		if err != nil {
			break
		}
		if j.GPUUUID != "" && (j.Kind != "bisect" || j.GPUUUID != "GPU-one" || j.Status != jobstate.Cancelled) {
			t.Errorf("job %d: kind %q, card %q, %s; want a bisect job on GPU-one, cancelled", j.ID, j.Kind, j.GPUUUID, j.Status)
		}
		if strings.Contains(j.FailureReason, "card GPU-one is gone") {
			stoppedJobs++
		}
	}
	if stoppedJobs != 1 {
		t.Errorf("%d jobs cancelled because the card is gone, want 1", stoppedJobs)
	}
}
