package bisectjob_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

const card = "GPU-bisect-card"

// pinnedEnv is a bisect of 16 commits that has run four jobs on card
// (both ends and two midpoints) and waits for its fifth, pinned there,
// with the runner that has the card registered; the store and the runner
// share a clock the test moves.
type pinnedEnv struct {
	ctx    context.Context
	st     store.Store
	now    time.Time
	runner *bisectjob.Runner
	outbox *memOutbox
	rec    store.BisectRecord
	job    store.Job
}

func newPinnedEnv(t *testing.T) *pinnedEnv {
	t.Helper()
	e := &pinnedEnv{ctx: context.Background(), now: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), outbox: &memOutbox{}}
	clock := func() time.Time { return e.now }
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "perfgate.db"), store.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	e.register(t, card)
	ag := &agent{t: t, st: st, rng: rand.New(rand.NewPCG(1, 2)), level: map[string]float64{}, broken: map[string]bool{}}
	var commits []bisect.Commit
	for i := 0; i <= 16; i++ {
		sha := fmt.Sprintf("%x", sha1.Sum([]byte{byte(i)}))
		commits = append(commits, bisect.Commit{SHA: sha, Title: fmt.Sprintf("change %d", i)})
		if i >= 11 {
			ag.level[sha] = math.Log(1.15)
		}
	}
	e.runner = bisectjob.New(st, spec, bisectjob.OutboxReporter{Outbox: e.outbox})
	e.runner.Now = clock
	rec, err := e.runner.Start(e.ctx, store.BisectRecord{Repo: repo, Metric: "tpot_median", RequestedBy: "maintainer", Number: 7,
		InstallationID: githubtest.InstallationID}, commits, bisect.Config{Unit: "ms"})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.advance(t, time.Minute)
		e.register(t, card) // the runner calls in
		job, ok := ag.work(e.ctx)
		if !ok {
			t.Fatal("no bisect job queued")
		}
		if _, err := e.runner.JobDone(e.ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	if e.rec, err = st.GetBisect(e.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if e.job, err = st.GetJob(e.ctx, e.rec.JobID); err != nil {
		t.Fatal(err)
	}
	if e.job.Status != jobstate.Queued || e.job.GPUUUID != card {
		t.Fatalf("pending job %d: %s on %q, want queued on %s", e.job.ID, e.job.Status, e.job.GPUUUID, card)
	}
	return e
}

// register (re-)registers the runner "gpu-box" offering cards: a call-in.
func (e *pinnedEnv) register(t *testing.T, cards ...string) {
	t.Helper()
	reg := store.AgentRegistration{Name: "gpu-box", TokenHash: "hash", GPUUUIDs: cards}
	for _, c := range cards {
		reg.Cards = append(reg.Cards, fleet.Card{UUID: c, Model: "NVIDIA H100 80GB HBM3"})
	}
	if _, err := e.st.RegisterAgent(e.ctx, reg); err != nil {
		t.Fatal(err)
	}
}

func (e *pinnedEnv) drain(t *testing.T, drained bool) {
	t.Helper()
	if _, err := e.st.SetAgentDrained(e.ctx, "gpu-box", drained); err != nil {
		t.Fatal(err)
	}
}

func (e *pinnedEnv) advance(_ *testing.T, d time.Duration) { e.now = e.now.Add(d) }

func (e *pinnedEnv) resume(t *testing.T) {
	t.Helper()
	if err := e.runner.Resume(e.ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
}

// TestPinnedCardGone: Resume stops a bisect whose pinned card has been
// gone past the grace — drained, silent, or dropped from its runner —
// with a comment naming the card, since when, and the range narrowed so
// far; within the grace, or once the card is back, the bisect waits.
func TestPinnedCardGone(t *testing.T) {
	tests := []struct {
		name  string
		steps func(t *testing.T, e *pinnedEnv)
		stop  bool
		why   string
		since string // when the comment says the card went, from 08:00
	}{
		{name: "drained past the grace", stop: true, why: "runner gpu-box is drained", since: "08:05", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, time.Minute)
			e.drain(t, true)
			e.advance(t, 10*time.Minute)
			e.register(t, card) // a drained runner still calls in: its card stays out
			e.resume(t)
			e.advance(t, 6*time.Minute)
			e.resume(t)
		}},
		{name: "drained within the grace", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, time.Minute)
			e.drain(t, true)
			e.advance(t, 14*time.Minute)
			e.resume(t)
		}},
		{name: "silent past the grace", stop: true, why: "runner gpu-box last called in at 08:04 UTC", since: "08:04", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, 16*time.Minute)
			e.resume(t)
		}},
		{name: "silent within the grace", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, 14*time.Minute)
			e.resume(t)
		}},
		{name: "back after a drain", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, time.Minute)
			e.drain(t, true)
			e.advance(t, 10*time.Minute)
			e.resume(t)
			e.drain(t, false)
			e.advance(t, 10*time.Minute)
			e.register(t, card)
			e.resume(t)
			e.advance(t, 10*time.Minute)
			e.register(t, card)
			e.resume(t)
		}},
		{name: "dropped from its runner past the grace", stop: true, why: "no registered runner offers it", since: "08:34", steps: func(t *testing.T, e *pinnedEnv) {
			// The job has waited 30 minutes while its runner was busy
			// elsewhere; the grace of a card that vanishes runs from when
			// it vanished, not from when the job was queued.
			e.advance(t, 30*time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
			if e.status(t) != store.BisectRunning {
				t.Fatal("stopped the moment the card was missed")
			}
			e.advance(t, 16*time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
		}},
		{name: "dropped, past the grace on another replica", stop: true, why: "no registered runner offers it", since: "08:34", steps: func(t *testing.T, e *pinnedEnv) {
			// When the card went missing is in the store: a restarted
			// server, or another replica's pass, runs the same grace
			// instead of starting it over.
			e.advance(t, 30*time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
			other := bisectjob.New(e.st, spec, bisectjob.OutboxReporter{Outbox: e.outbox})
			other.Now = func() time.Time { return e.now }
			e.runner = other
			e.advance(t, 16*time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
		}},
		{name: "dropped and back within the grace", steps: func(t *testing.T, e *pinnedEnv) {
			e.advance(t, time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
			e.advance(t, 10*time.Minute)
			e.register(t, card)
			e.resume(t)
			e.advance(t, 10*time.Minute)
			e.register(t, "GPU-other-card")
			e.resume(t)
			e.advance(t, 10*time.Minute)
			e.register(t, card)
			e.resume(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPinnedEnv(t)
			tt.steps(t, e)
			job, err := e.st.GetJob(e.ctx, e.job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.stop {
				if st := e.status(t); st != store.BisectRunning || job.Status != jobstate.Queued || len(e.outbox.comments) != 0 {
					t.Fatalf("bisect %s, job %s, comments %+v; want it still waiting", st, job.Status, e.outbox.comments)
				}
				return
			}
			if st := e.status(t); st != store.BisectFailed || job.Status != jobstate.Cancelled {
				t.Fatalf("bisect %s, job %s; want it stopped and the job cancelled", st, job.Status)
			}
			if len(e.outbox.comments) != 1 || e.outbox.comments[0].Number != 7 {
				t.Fatalf("comments %+v, want one on #7", e.outbox.comments)
			}
			s, err := bisect.Load(e.rec.State)
			if err != nil {
				t.Fatal(err)
			}
			if s.Lo == 0 && s.Hi == len(s.Commits)-1 {
				t.Fatalf("the fixture's four jobs narrowed nothing (lo %d, hi %d)", s.Lo, s.Hi)
			}
			body := e.outbox.comments[0].Body
			t.Logf("comment:\n%s", body)
			for _, want := range []string{
				"card `" + card + "`", "gone since 2026-12-03 " + tt.since + " UTC", tt.why,
				fmt.Sprintf("Job %d is cancelled", job.ID),
				"does not move a bisect to another card",
				fmt.Sprintf("good at %.7s, bad at %.7s — %d of the 16 commits", s.Commits[s.Lo].SHA, s.Commits[s.Hi].SHA, s.Hi-s.Lo),
				fmt.Sprintf("`/perf bisect %.7s %.7s`", s.Commits[0].SHA, s.Commits[16].SHA),
				fmt.Sprintf("`/perf bisect %.7s %.7s`", s.Commits[s.Lo].SHA, s.Commits[s.Hi].SHA),
				"@maintainer",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("comment lacks %q:\n%s", want, body)
				}
			}
			// The cancelled job's end, when the judge hands it over, finds
			// no bisect waiting: no second report, nothing re-queued.
			if handled, err := e.runner.JobDone(e.ctx, job); !handled || err != nil {
				t.Errorf("JobDone of the cancelled job: %v, %v", handled, err)
			}
			e.resume(t)
			queue, err := e.st.ListQueue(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(e.outbox.comments) != 1 || len(queue) != 0 {
				t.Errorf("after the stop: %d comments, %d queued jobs; want 1 and 0", len(e.outbox.comments), len(queue))
			}
		})
	}
}

func (e *pinnedEnv) status(t *testing.T) string {
	t.Helper()
	rec, err := e.st.GetBisect(e.ctx, e.rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}
