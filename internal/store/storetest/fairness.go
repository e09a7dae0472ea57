package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// fleetSim drives a fleet of runners over one store on the test's clock:
// each runner holds the job it claimed for jobLen, finishes it and claims
// the next; busy repositories keep backlog jobs queued.
type fleetSim struct {
	t       *testing.T
	e       *env
	st      store.Store
	jobLen  time.Duration
	backlog int
	busy    map[string]bool
	running []simRun // one per runner; zero job: idle
	claimed map[int64]time.Time
	pr      int
}

type simRun struct {
	job  store.Job
	ends time.Time
}

func newFleetSim(t *testing.T, e *env, st store.Store, runners int, jobLen time.Duration, backlog int) *fleetSim {
	return &fleetSim{t: t, e: e, st: st, jobLen: jobLen, backlog: backlog, busy: map[string]bool{},
		running: make([]simRun, runners), claimed: map[int64]time.Time{}}
}

// enqueue queues a job of repo on a pull request of its own.
func (s *fleetSim) enqueue(repo string, spec store.JobSpec) store.Job {
	s.t.Helper()
	s.pr++
	spec.Repo, spec.PRNumber, spec.HeadSHA = repo, s.pr, sha40("c")
	if spec.Tier == "" {
		spec.Tier = "quick"
	}
	j, err := s.st.Enqueue(s.e.ctx, spec)
	if err != nil {
		s.t.Fatalf("enqueue %s: %v", repo, err)
	}
	return j
}

// keepBusy gives repo a standing backlog, refilled at every claim.
func (s *fleetSim) keepBusy(repo string) {
	s.busy[repo] = true
	for range s.backlog {
		s.enqueue(repo, store.JobSpec{})
	}
}

// start has the idle runners claim, one every stagger.
func (s *fleetSim) start(stagger time.Duration) {
	for i := range s.running {
		if i > 0 {
			s.e.clock.Advance(stagger)
		}
		s.claim(i)
	}
}

func (s *fleetSim) claim(i int) {
	s.t.Helper()
	j, err := s.st.Claim(s.e.ctx, store.ClaimRequest{Lease: 24 * time.Hour})
	if err != nil {
		s.running[i] = simRun{}
		return // idle until the next step
	}
	now := s.e.clock.Now()
	s.running[i] = simRun{job: j, ends: now.Add(s.jobLen)}
	s.claimed[j.ID] = now
	if s.busy[j.Repo] {
		s.enqueue(j.Repo, store.JobSpec{})
	}
}

// step advances the clock to the next runner's end, finishes its job and
// has it claim again (an idle runner tries again too).
func (s *fleetSim) step() {
	s.t.Helper()
	next := -1
	for i, r := range s.running {
		if r.job.ID != 0 && (next < 0 || r.ends.Before(s.running[next].ends)) {
			next = i
		}
	}
	if next < 0 {
		s.t.Fatal("every runner is idle")
	}
	r := s.running[next]
	s.e.clock.Advance(r.ends.Sub(s.e.clock.Now()))
	if _, err := s.st.Finish(s.e.ctx, r.job.ID, r.job.LeaseID, jobstate.Succeeded, ""); err != nil {
		s.t.Fatalf("finish %d: %v", r.job.ID, err)
	}
	for i, r := range s.running {
		if i == next || r.job.ID == 0 {
			s.claim(i)
		}
	}
}

// runUntil steps until job id is claimed or limit has passed, and returns
// when it was claimed (zero: not within limit).
func (s *fleetSim) runUntil(id int64, limit time.Duration) time.Time {
	end := s.e.clock.Now().Add(limit)
	for s.claimed[id].IsZero() && s.e.clock.Now().Before(end) {
		s.step()
	}
	return s.claimed[id]
}

// The numbers (8 runners, 10 busy repositories, 10-minute jobs): a
// repository whose queued jobs were all cancelled — its pull requests
// closed, or the jobs cancelled one by one — gets its next job claimed
// within about one round (13 min 45 s here), not after every job it never
// ran: without the refund the 5-job case waited 58 min 45 s and the 50-job
// case 9 h 25 min in this same simulation.
func testFleetRefund(t *testing.T, newDSN func(t testing.TB) string) {
	const (
		runners = 8
		jobLen  = 10 * time.Minute
		backlog = 5
	)
	closePRs := func(e *env, st store.Store, jobs []store.Job) {
		for _, j := range jobs {
			sup, err := st.CancelPRJobs(e.ctx, j.Repo, j.PRNumber, "pull request closed")
			if err != nil || len(sup.Cancelled) != 1 {
				t.Fatalf("close %s#%d = %+v, %v", j.Repo, j.PRNumber, sup, err)
			}
		}
	}
	cancelEach := func(e *env, st store.Store, jobs []store.Job) {
		for _, j := range jobs {
			if c, err := st.CancelJob(e.ctx, j.ID, "cancelled"); err != nil || c.Status != jobstate.Cancelled {
				t.Fatalf("cancel %d = %v, %v", j.ID, c.Status, err)
			}
		}
	}
	for _, tc := range []struct {
		name      string
		cancelled int
		cancel    func(e *env, st store.Store, jobs []store.Job)
	}{
		{"5 pull requests closed", 5, closePRs},
		{"50 jobs cancelled", 50, cancelEach},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newDSN)
			sim := newFleetSim(t, e, e.st, runners, jobLen, backlog)
			const target = "acme/r0"
			for i := range 10 {
				sim.keepBusy(fmt.Sprintf("acme/r%d", i))
			}
			sim.start(jobLen / runners)
			for e.clock.Now().Before(NewClock().Now().Add(time.Hour)) {
				sim.step()
			}
			// The target stops refilling; its line grows to tc.cancelled
			// queued jobs, and then every one of them is cancelled.
			delete(sim.busy, target)
			queued, err := e.st.ListJobs(e.ctx, store.JobFilter{Repo: target, Status: jobstate.Queued})
			if err != nil {
				t.Fatal(err)
			}
			for len(queued) < tc.cancelled {
				queued = append(queued, sim.enqueue(target, store.JobSpec{}))
			}
			tc.cancel(e, e.st, queued)
			asked := e.clock.Now()
			next := sim.enqueue(target, store.JobSpec{})
			at := sim.runUntil(next.ID, 24*time.Hour)
			if at.IsZero() {
				t.Fatalf("%s's next job was not claimed within a day", target)
			}
			wait := at.Sub(asked)
			t.Logf("%d cancelled: the next job of %s waited %v (one job is %v; %d repositories share %d runners)",
				tc.cancelled, target, wait, jobLen, 10, runners)
			// One round of the 10 repositories over 8 runners is 12.5
			// minutes: the job is claimed within it and the next runner's
			// turn.
			if limit := 15 * time.Minute; wait > limit {
				t.Errorf("%s's next job waited %v after %d cancellations, want ≤ %v (its cancelled jobs were not refunded)",
					target, wait, tc.cancelled, limit)
			}
		})
	}
}

// Strict priority with demand above capacity: quick work never runs out,
// yet the nightly job is claimed once it has waited fleet.AgeAfter of its
// class, and the bisect once it has waited its own — each within one job
// length of its bound, and not before it.
func testFleetAging(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	sim := newFleetSim(t, e, e.st, 1, 10*time.Minute, 2)
	t0 := e.clock.Now()
	nightly := sim.enqueue("acme/nightly", store.JobSpec{Tier: "nightly", Kind: "nightly"})
	bisect := sim.enqueue("acme/bisect", store.JobSpec{Tier: "quick", Kind: "bisect"})
	sim.keepBusy("acme/a")
	sim.keepBusy("acme/b")
	sim.start(0)
	for _, tc := range []struct {
		name string
		job  store.Job
	}{
		{"nightly", nightly},
		{"bisect", bisect},
	} {
		bound := fleet.AgeAfter(tc.job.Priority)
		at := sim.runUntil(tc.job.ID, 24*time.Hour)
		if at.IsZero() {
			t.Fatalf("the %s job was never claimed under steady quick work", tc.name)
		}
		wait := at.Sub(t0)
		t.Logf("%s job claimed after %v (ages after %v)", tc.name, wait, bound)
		if wait < bound || wait > bound+sim.jobLen {
			t.Errorf("%s job claimed after %v, want within one job length after its aging bound %v", tc.name, wait, bound)
		}
	}
	// The listing shows the claim order: merge work, then a nightly job
	// past its bound before a quick job that has waited as long.
	e2 := newEnv(t, newDSN)
	old := e2.enqueue(t, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: "acme/old"})
	quick := e2.enqueue(t, store.JobSpec{Tier: "quick", Repo: "acme/q"})
	e2.clock.Advance(fleet.AgeAfter(fleet.PriorityNightly))
	merge := e2.enqueue(t, store.JobSpec{Tier: "merge", Kind: "merge_group", Repo: "acme/m"})
	want := []int64{merge.ID, old.ID, quick.ID}
	list, err := e2.st.ListJobs(e2.ctx, store.JobFilter{Status: jobstate.Queued, ClaimOrder: true})
	if err != nil || len(list) != 3 || !slices.Equal(jobIDs(list), want) {
		t.Fatalf("claim order listing = %v, %v; want merge, the aged nightly job, quick: %v", jobIDs(list), err, want)
	}
	var got []int64
	for range want {
		got = append(got, e2.claim(t, nil, nil, time.Minute).ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claimed %v, want merge, the aged nightly job, quick: %v", got, want)
	}
}

func jobIDs(js []store.Job) []int64 {
	out := make([]int64, 0, len(js))
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// A runner no queued pool is for is answered at once (the queue_pools
// shortcut) and still recorded as seen; once a job it can run is queued
// — its labels, its pinned card — it gets it.
func testClaimUnservedPool(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	a, err := e.st.RegisterAgent(e.ctx, store.AgentRegistration{Name: "h100-box", Labels: []string{"gpu", "h100"},
		GPUUUIDs: []string{"GPU-h1"}, TokenHash: store.HashToken("h100-box")})
	if err != nil {
		t.Fatal(err)
	}
	req := store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Minute}
	for range 20 {
		e.enqueue(t, store.JobSpec{Labels: []string{"gpu", "a100"}})
	}
	e.enqueue(t, store.JobSpec{Labels: []string{"gpu"}, GPUUUID: "GPU-other"})
	e.clock.Advance(time.Minute)
	if _, err := e.st.Claim(e.ctx, req); !errors.Is(err, store.ErrNoJob) {
		t.Fatalf("claim of an unserved runner = %v, want ErrNoJob", err)
	}
	agents, err := e.st.ListAgents(e.ctx)
	if err != nil || len(agents) != 1 || !agents[0].LastSeenAt.Equal(e.clock.Now()) {
		t.Fatalf("after an empty claim the runner was last seen %v (%v), want now %v", agents[0].LastSeenAt, err, e.clock.Now())
	}
	for _, spec := range []store.JobSpec{
		{Labels: []string{"gpu"}, GPUUUID: "GPU-h1"},
		{Labels: []string{"h100"}},
		{},
	} {
		j := e.enqueue(t, spec)
		got, err := e.st.Claim(e.ctx, req)
		if err != nil || got.ID != j.ID {
			t.Errorf("claim after queueing %+v = %d, %v; want job %d", spec, got.ID, err, j.ID)
		}
	}
}

// Usage summed by the database agrees with the same attempts summed in
// memory (fleet.Usage over ListAttempts) over about a month of jobs of three
// repositories and two tiers, ending at every hour of the week — week
// boundaries included — with lost attempts among them.
func testUsageInSQL(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	rng := rand.New(rand.NewPCG(23, 1))
	for i := range 80 {
		repo := []string{"acme/a", "acme/b", "other/c"}[rng.IntN(3)]
		tier := []string{"quick", "nightly"}[rng.IntN(2)]
		e.enqueue(t, store.JobSpec{Repo: repo, Tier: tier, PRNumber: i + 1})
		j := e.claim(t, nil, nil, time.Minute)
		e.clock.Advance(time.Duration(rng.IntN(180)+1) * time.Minute)
		if rng.IntN(5) == 0 {
			if _, err := e.st.ReapExpired(e.ctx); err != nil { // its agent was lost
				t.Fatal(err)
			}
			if j, err := e.st.Claim(e.ctx, store.ClaimRequest{Lease: 24 * time.Hour}); err == nil {
				e.clock.Advance(time.Duration(rng.IntN(60)+1) * time.Minute)
				if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
					t.Fatal(err)
				}
			}
		} else if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Duration(rng.IntN(12*60)) * time.Minute)
	}
	for _, f := range []store.UsageFilter{{}, {Repo: "acme/b"}, {Since: NewClock().Now().Add(10 * 24 * time.Hour), Until: NewClock().Now().Add(30 * 24 * time.Hour)}} {
		attempts, err := e.st.ListAttempts(e.ctx, store.AttemptFilter{Repo: f.Repo, Since: f.Since, Until: f.Until})
		if err != nil {
			t.Fatal(err)
		}
		var ua []fleet.UsageAttempt
		for _, a := range attempts {
			ua = append(ua, fleet.UsageAttempt{JobID: a.JobID, Repo: a.Repo, Tier: a.Tier, Started: a.StartedAt, Ended: a.EndedAt})
		}
		want := fleet.Usage(ua, nil, nil)
		got, err := e.st.Usage(e.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(want) < 3 {
			t.Fatalf("filter %+v: %d rows from the database, %d in memory (of %d attempts)", f, len(got), len(want), len(attempts))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Repo != w.Repo || g.Tier != w.Tier || g.Week != w.Week || !g.WeekStart.Equal(w.WeekStart) || g.Jobs != w.Jobs ||
				math.Abs(g.GPUHours-w.GPUHours) > 1e-6 {
				t.Errorf("filter %+v, row %d: database %+v, in memory %+v", f, i, g, w)
			}
		}
	}
}

// Under a backlog the outbox sends a check's verdict first, then other
// writes (a comment), then queue notes — whatever order they were queued
// in — and a check's notes are one row however often they change.
func testOutboxPriorities(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	check := func(sha string, status string) store.CheckRun {
		t.Helper()
		cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", PRNumber: 7, InstallationID: 42,
			State: store.CheckQueued, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: status}})
		if err != nil || !ok {
			t.Fatalf("apply check %s: %v %v", status, ok, err)
		}
		return cr
	}
	note := check(sha40("1"), "queued")
	for range 5 { // the note follows the queue: the same row, re-armed
		if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: note.ID, From: store.CheckQueued, Repo: "acme/llm", HeadSHA: sha40("1"), Tier: "quick",
			State: store.CheckQueued, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued", Summary: "3 jobs ahead"}}); err != nil {
			t.Fatal(err)
		}
	}
	body, _ := json.Marshal(store.CommentBody{Number: 7, Body: "hello"})
	if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: "comment-1", Kind: store.EffectComment, InstallationID: 42, Repo: "acme/llm", Body: body}); err != nil {
		t.Fatal(err)
	}
	verdict := check(sha40("2"), "completed")
	want := []string{store.CheckSyncKey(verdict.ID), "comment-1", store.CheckSyncKey(note.ID)}
	var got []string
	for range want {
		es, err := e.st.ClaimEffects(e.ctx, 1, time.Minute)
		if err != nil || len(es) != 1 {
			t.Fatalf("claim effects = %v, %v", es, err)
		}
		got = append(got, es[0].Key)
	}
	if !slices.Equal(got, want) {
		t.Errorf("outbox sent %v, want the verdict, the comment, the queue note: %v", got, want)
	}
	if es, _ := e.st.ClaimEffects(e.ctx, 10, time.Minute); len(es) != 0 {
		t.Errorf("%d more writes after three: the note's changes were not coalesced", len(es))
	}
}
