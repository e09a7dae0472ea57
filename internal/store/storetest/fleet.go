package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// openShares opens another handle on e's database with fair-share
// settings (a server replica configured with them).
func (e *env) openShares(t *testing.T, s fleet.Shares) store.Store {
	t.Helper()
	st, err := store.Open(e.ctx, e.dsn, store.WithClock(e.clock.Now), store.WithFairShare(s))
	if err != nil {
		t.Fatalf("open %s: %v", e.dsn, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// runOne claims the next job on st as one runner, holds it for took and
// finishes it; ok is false when nothing was left.
func (e *env) runOne(t *testing.T, st store.Store, agentID int64, took time.Duration) (store.Job, bool) {
	t.Helper()
	j, err := st.Claim(e.ctx, store.ClaimRequest{AgentID: agentID, Labels: []string{"gpu"}, Lease: 24 * time.Hour})
	if errors.Is(err, store.ErrNoJob) {
		return store.Job{}, false
	}
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	e.clock.Advance(took)
	if _, err := st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatalf("finish %d: %v", j.ID, err)
	}
	return j, true
}

// A merge job queued behind 20 quick jobs is claimed first; quick comes
// before nightly, nightly before bisect work.
func testFleetPriorities(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	bisect := e.enqueue(t, store.JobSpec{Tier: "quick", Kind: "bisect", Repo: "acme/other"})
	nightly := e.enqueue(t, store.JobSpec{Tier: "nightly", Kind: "nightly"})
	var quick []int64
	for i := range 20 {
		quick = append(quick, e.enqueue(t, store.JobSpec{PRNumber: i + 1, Kind: "pull_request.synchronize"}).ID)
	}
	merge := e.enqueue(t, store.JobSpec{Tier: "merge", Kind: "merge_group", Repo: "acme/other"})
	if merge.Priority != fleet.PriorityMerge || nightly.Priority != fleet.PriorityNightly || bisect.Priority != fleet.PriorityBatch {
		t.Errorf("priorities: merge %d nightly %d bisect %d", merge.Priority, nightly.Priority, bisect.Priority)
	}
	queue, err := e.st.ListJobs(e.ctx, store.JobFilter{Status: jobstate.Queued, ClaimOrder: true})
	if err != nil || len(queue) != 23 || queue[0].ID != merge.ID {
		t.Fatalf("claim order listing starts with %v (%d jobs), %v; want the merge job %d", queue[0].ID, len(queue), err, merge.ID)
	}
	var got []int64
	for {
		j, err := e.st.Claim(e.ctx, store.ClaimRequest{Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	want := append(append([]int64{merge.ID}, quick...), nightly.ID, bisect.ID)
	if !slices.Equal(got, want) {
		t.Errorf("claimed %v, want merge, the 20 quick jobs in order, nightly, bisect: %v", got, want)
	}
}

// shareBound checks the start-time fair queuing guarantee at every prefix
// of a claim sequence during which both tenants had queued work: the
// weighted counts never differ by more than one job of each
// (|n_a/w_a − n_b/w_b| ≤ 1/w_a + 1/w_b, jobs of equal cost).
func shareBound(t *testing.T, seq []string, a, b string, wa, wb float64) {
	t.Helper()
	na, nb := 0.0, 0.0
	bound := 1/wa + 1/wb
	for i, r := range seq {
		switch r {
		case a:
			na++
		case b:
			nb++
		}
		if d := math.Abs(na/wa - nb/wb); d > bound+1e-9 {
			t.Errorf("after %d claims %s has %v and %s %v: weighted gap %.2f > bound %.2f (sequence %v)", i+1, a, na, b, nb, d, bound, seq)
			return
		}
	}
}

// Two repositories with bursts of 50 and 5 jobs share one runner in
// proportion to their weights, whether the small burst comes at the same
// time or while the large one is running; the share follows GPU time, so
// a repository whose jobs run three times as long gets a third as many.
func testFleetFairShare(t *testing.T, newDSN func(t testing.TB) string) {
	const big, small = "acme/big", "acme/small"
	burst := func(e *env, st store.Store, repo string, n int) {
		for i := range n {
			if _, err := st.Enqueue(e.ctx, store.JobSpec{Repo: repo, Tier: "quick", PRNumber: i + 1, HeadSHA: sha40("b"), Labels: []string{"gpu"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		weights map[string]float64
		late    int // the big burst's claims before the small one arrives
	}{
		{"equal weights, together", nil, 0},
		{"small weighs 2, together", map[string]float64{small: 2}, 0},
		{"small weighs 3, arrives late", map[string]float64{small: 3}, 10},
		{"big weighs 2, arrives late", map[string]float64{big: 2}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newDSN)
			shares := fleet.Shares{Weights: tc.weights}
			st := e.openShares(t, shares)
			wb, ws := shares.Weight(big), shares.Weight(small)
			burst(e, st, big, 50)
			var seq []string
			for range tc.late {
				j, _ := e.runOne(t, st, 0, 10*time.Minute)
				seq = append(seq, j.Repo)
			}
			burst(e, st, small, 5)
			var during []string // claims while both have work queued
			smallLeft := 5
			for smallLeft > 0 {
				j, ok := e.runOne(t, st, 0, 9*time.Minute) // a little under the 10-minute estimate
				if !ok {
					t.Fatal("queue ran dry with small jobs left")
				}
				seq, during = append(seq, j.Repo), append(during, j.Repo)
				if j.Repo == small {
					smallLeft--
				}
			}
			shareBound(t, during, big, small, wb, ws)
			n := float64(len(during))
			t.Logf("small's 5 jobs done within %d claims after it queued (FIFO: %d); its share %.2f, weights say %.2f",
				len(during), 50-tc.late+5, 5/n, ws/(wb+ws))
			// All 55 run, none twice.
			for {
				j, ok := e.runOne(t, st, 0, 10*time.Minute)
				if !ok {
					break
				}
				seq = append(seq, j.Repo)
			}
			if len(seq) != 55 {
				t.Errorf("ran %d jobs, want 55", len(seq))
			}
		})
	}
	t.Run("share follows GPU time", func(t *testing.T) {
		// Both repositories keep two jobs queued at all times; slow's jobs
		// take 30 minutes, fast's 10. Equal weights: equal GPU time.
		e := newEnv(t, newDSN)
		st := e.openShares(t, fleet.Shares{})
		took := map[string]time.Duration{"acme/slow": 30 * time.Minute, "acme/fast": 10 * time.Minute}
		gpu := map[string]time.Duration{}
		jobs := map[string]int{}
		for _, r := range []string{"acme/slow", "acme/fast"} {
			burst(e, st, r, 2)
		}
		for range 60 {
			j, err := st.Claim(e.ctx, store.ClaimRequest{Labels: []string{"gpu"}, Lease: 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			burst(e, st, j.Repo, 1) // keep its line full
			e.clock.Advance(took[j.Repo])
			if _, err := st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
				t.Fatal(err)
			}
			gpu[j.Repo] += took[j.Repo]
			jobs[j.Repo]++
		}
		ratio := gpu["acme/slow"].Hours() / gpu["acme/fast"].Hours()
		t.Logf("60 jobs: slow ran %d (%.1f GPU-h), fast %d (%.1f GPU-h): GPU-time ratio %.2f", jobs["acme/slow"], gpu["acme/slow"].Hours(),
			jobs["acme/fast"], gpu["acme/fast"].Hours(), ratio)
		// One 30-minute job either way is the granularity: 60 jobs of
		// these run ~15 GPU-hours each side.
		if ratio < 0.85 || ratio > 1.15 {
			t.Errorf("GPU-time ratio slow/fast = %.2f, want within 15%% of 1", ratio)
		}
	})
}

// A newer push's job takes the place of the queued job it superseded:
// jobs queued after the old one stay behind the new one.
func testFleetHandoff(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	oldSHA, newSHA := sha40("1"), sha40("2")
	first := e.enqueue(t, store.JobSpec{PRNumber: 1})
	old := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: oldSHA})
	after := e.enqueue(t, store.JobSpec{PRNumber: 8})
	sup, err := e.st.CancelSuperseded(e.ctx, "acme/llm", 7, newSHA)
	if err != nil || len(sup.Cancelled) != 1 {
		t.Fatalf("supersede = %+v, %v", sup, err)
	}
	e.clock.Advance(time.Second)
	repl := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: newSHA})
	if repl.Seq != old.Seq || repl.VTag != old.VTag || repl.ID == old.ID {
		t.Errorf("replacement seq %d tag %g, want the superseded job's %d %g", repl.Seq, repl.VTag, old.Seq, old.VTag)
	}
	// A second job of the PR (another push, or another tier) finds no
	// place left to take: it goes to the back.
	again := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: newSHA})
	var got []int64
	for range 4 {
		got = append(got, e.claim(t, nil, nil, time.Minute).ID)
	}
	if want := []int64{first.ID, repl.ID, after.ID, again.ID}; !slices.Equal(got, want) {
		t.Errorf("claim order %v, want %v (the replacement where the old job stood)", got, want)
	}
	// Closing a PR frees no place, and a place unclaimed for an hour is
	// gone.
	closed := e.enqueue(t, store.JobSpec{PRNumber: 9, HeadSHA: oldSHA})
	stale := e.enqueue(t, store.JobSpec{PRNumber: 10, HeadSHA: oldSHA})
	tail := e.enqueue(t, store.JobSpec{PRNumber: 11})
	if _, err := e.st.CancelPRJobs(e.ctx, "acme/llm", 9, "pull request closed"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CancelSuperseded(e.ctx, "acme/llm", 10, newSHA); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	reopened := e.enqueue(t, store.JobSpec{PRNumber: 9, HeadSHA: newSHA})
	late := e.enqueue(t, store.JobSpec{PRNumber: 10, HeadSHA: newSHA})
	if reopened.Seq == closed.Seq || late.Seq == stale.Seq {
		t.Errorf("reopened seq %d (closed %d), late push seq %d (stale %d): want fresh places", reopened.Seq, closed.Seq, late.Seq, stale.Seq)
	}
	if j := e.claim(t, nil, nil, time.Minute); j.ID != tail.ID {
		t.Errorf("claimed %d, want %d queued before them", j.ID, tail.ID)
	}
}

// A drained runner finishes its job and takes no new one; undrained, it
// works again. The drain survives a re-registration.
func testFleetDrain(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	held := map[string]string{} // name → its current token hash
	reg := func(name string) store.Agent {
		hash := store.HashToken(name + fmt.Sprint(e.clock.Now().UnixNano()))
		a, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: name, Labels: []string{"gpu"}, TokenHash: hash, PreviousTokenHash: held[name]})
		if err != nil {
			t.Fatal(err)
		}
		held[name] = hash
		return a
	}
	a, b := reg("gpu-a"), reg("gpu-b")
	claim := func(agent store.Agent) (store.Job, error) {
		return e.st.Claim(e.ctx, store.ClaimRequest{AgentID: agent.ID, Labels: agent.Labels, Lease: time.Minute})
	}
	e.enqueue(t, store.JobSpec{Labels: []string{"gpu"}})
	e.enqueue(t, store.JobSpec{Labels: []string{"gpu"}})
	running, err := claim(a)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.st.SetAgentDrained(e.ctx, "gpu-a", true)
	if err != nil || !d.Drained || !d.DrainedAt.Equal(e.clock.Now()) {
		t.Fatalf("drain = %+v, %v", d, err)
	}
	for range 3 {
		if j, err := claim(a); !errors.Is(err, store.ErrNoJob) {
			t.Fatalf("drained runner claimed job %d (%v)", j.ID, err)
		}
	}
	// Its job runs to the end.
	if _, err := e.st.Heartbeat(e.ctx, running.ID, running.LeaseID, time.Minute); err != nil {
		t.Errorf("heartbeat of the drained runner's job: %v", err)
	}
	if _, err := e.st.Finish(e.ctx, running.ID, running.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Errorf("finish of the drained runner's job: %v", err)
	}
	e.clock.Advance(time.Minute)
	reg("gpu-a") // a restart re-registers
	if agents, _ := e.st.ListAgents(e.ctx); !agents[0].Drained || agents[0].Name != "gpu-a" {
		t.Errorf("re-registration undrained the runner: %+v", agents[0])
	}
	if _, err := claim(a); !errors.Is(err, store.ErrNoJob) {
		t.Errorf("drained runner claimed after re-registering: %v", err)
	}
	if _, err := claim(b); err != nil {
		t.Errorf("the other runner: %v", err)
	}
	e.enqueue(t, store.JobSpec{Labels: []string{"gpu"}})
	u, err := e.st.SetAgentDrained(e.ctx, "gpu-a", false)
	if err != nil || u.Drained || !u.DrainedAt.IsZero() {
		t.Fatalf("undrain = %+v, %v", u, err)
	}
	if _, err := claim(a); err != nil {
		t.Errorf("undrained runner: %v", err)
	}
	if _, err := e.st.SetAgentDrained(e.ctx, "nobody", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("drain unknown runner: %v, want ErrNotFound", err)
	}
}

// A job pinned to a card waits for that card: no other runner takes it,
// not after its runner lost the lease, not while its runner is drained.
func testFleetPinned(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t) // a second replica hands out jobs too
	agents := map[string]store.Agent{}
	for _, c := range []string{"a", "b", "c"} {
		a, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "host-" + c, Labels: []string{"gpu"},
			GPUUUIDs: []string{"GPU-" + c}, TokenHash: store.HashToken("t" + c)})
		if err != nil {
			t.Fatal(err)
		}
		agents[c] = a
	}
	claim := func(st store.Store, c string) (store.Job, error) {
		a := agents[c]
		return st.Claim(e.ctx, store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Minute})
	}
	pinned := e.enqueue(t, store.JobSpec{Tier: "merge", Labels: []string{"gpu"}, GPUUUID: "GPU-b"})
	for i := range 10 {
		e.enqueue(t, store.JobSpec{PRNumber: i + 1, Labels: []string{"gpu"}})
	}
	ranOn := map[string]int{}
	check := func(c string, j store.Job) {
		if j.ID == pinned.ID {
			ranOn[c]++
		}
	}
	// a and c drain the queue; the pinned merge job, first in claim
	// order, is never theirs.
	for range 6 {
		for _, c := range []string{"a", "c"} {
			for _, st := range []store.Store{e.st, other} {
				if j, err := claim(st, c); err == nil {
					check(c, j)
					_, _ = st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, "")
				}
			}
		}
	}
	if ranOn["a"]+ranOn["c"] != 0 {
		t.Fatalf("pinned job ran on another card: %v", ranOn)
	}
	j, err := claim(other, "b")
	if err != nil || j.ID != pinned.ID || j.GPUUUID != "GPU-b" {
		t.Fatalf("its card's runner claimed %d (%v), want %d", j.ID, err, pinned.ID)
	}
	// Its runner goes silent: the job is re-queued and waits again.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetAgentDrained(e.ctx, "host-b", true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "c", "b"} {
		if j, err := claim(e.st, c); !errors.Is(err, store.ErrNoJob) {
			t.Fatalf("%s claimed job %d (%v) while the pinned job's runner is drained", c, j.ID, err)
		}
	}
	if _, err := e.st.SetAgentDrained(e.ctx, "host-b", false); err != nil {
		t.Fatal(err)
	}
	if j, err := claim(e.st, "b"); err != nil || j.ID != pinned.ID || j.Attempts != 2 {
		t.Fatalf("after undrain: claimed %d attempt %d (%v)", j.ID, j.Attempts, err)
	}
	if attempts, err := e.st.ListAttempts(e.ctx, store.AttemptFilter{}); err != nil {
		t.Fatal(err)
	} else {
		for _, a := range attempts {
			if a.JobID == pinned.ID && a.AgentID != agents["b"].ID {
				t.Errorf("pinned job's attempt %d ran on agent %d", a.Attempt, a.AgentID)
			}
		}
	}
}

// Runners keep the cards they reported.
func testFleetCards(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	cards := []fleet.Card{{UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "550.54.15"}}
	a, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "h", Labels: []string{"gpu", "h100"}, GPUUUIDs: []string{"GPU-1"},
		Cards: cards, TokenHash: store.HashToken("x")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Cards, cards) || a.Drained {
		t.Errorf("registered = %+v", a)
	}
	list, err := e.st.ListAgents(e.ctx)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Cards, cards) {
		t.Errorf("listed = %+v, %v", list, err)
	}
}

// Every attempt's GPU time is recorded, lost ones included, and summed by
// repository, tier and week with baseline reuse and regressions.
func testFleetUsage(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	start := e.clock.Now() // Saturday 2025-03-01 12:00: ISO week 2025-W09
	q := e.enqueue(t, store.JobSpec{PRNumber: 1, Labels: []string{"gpu"}})
	j := e.claim(t, []string{"gpu"}, nil, time.Minute)
	e.clock.Advance(2 * time.Minute) // the agent vanished
	if _, err := e.st.ReapExpired(e.ctx); err != nil {
		t.Fatal(err)
	}
	j = e.claim(t, []string{"gpu"}, nil, time.Hour)
	e.clock.Advance(28 * time.Minute)
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	// A retried finish records nothing twice.
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	m := e.enqueue(t, store.JobSpec{Tier: "merge", Repo: "acme/other"})
	e.clock.Advance(48 * time.Hour) // Monday: W10
	mj := e.claim(t, nil, nil, 2*time.Hour)
	e.clock.Advance(90 * time.Minute)
	if _, err := e.st.Finish(e.ctx, mj.ID, mj.LeaseID, jobstate.Failed, "engine crashed"); err != nil {
		t.Fatal(err)
	}
	attempts, err := e.st.ListAttempts(e.ctx, store.AttemptFilter{})
	if err != nil || len(attempts) != 3 {
		t.Fatalf("attempts = %+v, %v", attempts, err)
	}
	if a := attempts[2]; a.JobID != q.ID || a.Attempt != 1 || a.Status != "lost" || a.EndedAt.Sub(a.StartedAt) != 2*time.Minute || a.Pool != "gpu" {
		t.Errorf("lost attempt = %+v", a)
	}
	if a := attempts[0]; a.JobID != m.ID || a.Status != "failed" || a.Tier != "merge" {
		t.Errorf("newest attempt = %+v", a)
	}
	if ok, err := e.st.ListAttempts(e.ctx, store.AttemptFilter{Succeeded: true, Tier: "quick"}); err != nil || len(ok) != 1 || ok[0].Attempt != 2 {
		t.Errorf("succeeded quick attempts = %+v, %v", ok, err)
	}
	// A check judged against a stored baseline, and a regression (seen
	// twice on one commit).
	sha := sha40("c")
	if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", State: store.CheckWarned,
		Verdict: []byte(`{"report":{"design":"stored"}}`)}); err != nil {
		t.Fatal(err)
	}
	// Not reuses: a check that measured its own base, an interleaved one,
	// one still queued; a reuse stays one when the state moves on.
	for i, v := range []string{`{"report":{"design":"stored"},"baseline_job":4}`, `{"report":{"design":"interleaved"}}`, `{}`} {
		if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha40(fmt.Sprint(i)), Tier: "quick", State: store.CheckPassed,
			Verdict: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if cr, err := e.st.GetCheckRun(e.ctx, "acme/llm", sha, "quick"); err != nil {
		t.Fatal(err)
	} else if ok, err := e.st.TransitionCheckRun(e.ctx, cr.ID, store.CheckWarned, store.CheckTransition{State: store.CheckEscalated}); err != nil || !ok {
		t.Fatalf("escalate: %v %v", ok, err)
	}
	for range 2 {
		if _, err := e.st.AppendAudit(e.ctx, store.AuditEntry{Actor: "perfgate", Action: "gate.regression", Repo: "acme/llm",
			Detail: []byte(`{"sha":"` + sha + `","tier":"quick"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := e.st.Usage(e.ctx, store.UsageFilter{Since: start.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.UsageRow{
		{Repo: "acme/llm", Tier: "quick", Week: "2025-W10", GPUHours: 0, Jobs: 0, BaselineReuse: 1, Regressions: 1},
		{Repo: "acme/other", Tier: "merge", Week: "2025-W10", GPUHours: 1.5, Jobs: 1},
		{Repo: "acme/llm", Tier: "quick", Week: "2025-W09", GPUHours: 0.5, Jobs: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("usage = %+v, want %d rows", rows, len(want))
	}
	for i, w := range want {
		g := rows[i]
		if g.Repo != w.Repo || g.Tier != w.Tier || g.Week != w.Week || math.Abs(g.GPUHours-w.GPUHours) > 1e-9 || g.Jobs != w.Jobs ||
			g.BaselineReuse != w.BaselineReuse || g.Regressions != w.Regressions {
			t.Errorf("usage row %d = %+v, want %+v", i, g, w)
		}
	}
	if only, err := e.st.Usage(e.ctx, store.UsageFilter{Repo: "acme/other"}); err != nil || len(only) != 1 {
		t.Errorf("one repository's usage = %+v, %v", only, err)
	}
}
