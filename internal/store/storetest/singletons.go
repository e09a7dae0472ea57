package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Two replicas (store handles on one database) race for the turns of a
// periodic job: each period is taken once, however many ask at once; a
// turn whose holder died unfinished is taken over once its hold lapses,
// a finished one never; and the bisect's "card missing since" clock is
// the same for both and survives either's restart.
func testSingletons(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	one, two := e.st, e.open(t)
	const hold = 30 * time.Minute
	period := e.clock.Now().Truncate(time.Hour)
	for i, p := range []time.Time{period, period.Add(time.Hour), period.Add(2 * time.Hour)} {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			took int
		)
		for g := range 8 {
			st := one
			if g%2 == 1 {
				st = two
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := st.TakeTurn(e.ctx, "retention", p, hold)
				if err != nil {
					t.Errorf("take turn: %v", err)
				}
				if ok {
					mu.Lock()
					took++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if took != 1 {
			t.Errorf("period %d: %d of 8 callers on two replicas took the turn, want 1", i, took)
		}
	}
	// Another job's turns are its own.
	if ok, err := two.TakeTurn(e.ctx, "nightly", period, hold); err != nil || !ok {
		t.Errorf("first nightly turn = %v, %v", ok, err)
	}
	// A holder that died: its turn is taken over after the hold, not
	// before; a finished turn is never taken again.
	p := period.Add(3 * time.Hour)
	if ok, _ := one.TakeTurn(e.ctx, "change-points", p, hold); !ok {
		t.Fatal("replica one did not get a fresh period")
	}
	if ok, _ := two.TakeTurn(e.ctx, "change-points", p, hold); ok {
		t.Error("replica two took a turn replica one holds")
	}
	e.clock.Advance(hold + time.Second)
	if ok, err := two.TakeTurn(e.ctx, "change-points", p, hold); err != nil || !ok {
		t.Errorf("replica two taking over a lapsed unfinished turn = %v, %v", ok, err)
	}
	if err := two.TurnDone(e.ctx, "change-points", p); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(hold + time.Second)
	if ok, _ := one.TakeTurn(e.ctx, "change-points", p, hold); ok {
		t.Error("replica one took a finished turn again")
	}
	// The card clock.
	t0 := e.clock.Now()
	if since, err := one.CardMissingSince(e.ctx, "GPU-1"); err != nil || !since.Equal(t0) {
		t.Fatalf("first sighting = %v, %v; want %v", since, err, t0)
	}
	e.clock.Advance(10 * time.Minute)
	if since, err := two.CardMissingSince(e.ctx, "GPU-1"); err != nil || !since.Equal(t0) {
		t.Errorf("replica two sees the card missing since %v, %v; want %v", since, err, t0)
	}
	if err := two.CardSeen(e.ctx, "GPU-1"); err != nil {
		t.Fatal(err)
	}
	if since, err := one.CardMissingSince(e.ctx, "GPU-1"); err != nil || !since.Equal(e.clock.Now()) {
		t.Errorf("after the card was seen again, missing since %v, %v; want now %v", since, err, e.clock.Now())
	}
}

// A long poll waiting on one replica wakes when another replica queues a
// job, or requeues one whose runner was lost (PostgreSQL LISTEN/NOTIFY),
// instead of at its next re-poll.
func testNotifyAcrossReplicas(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	if !e.st.Shared() {
		t.Skip("one server per SQLite database: its own wake-up is enough")
	}
	one, two := e.st, e.open(t)
	woken := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second): // a failure guard, not a wait
			t.Fatalf("replica one's long poll was not woken when replica two %s", what)
		}
	}
	ch := one.Notify()
	if _, err := two.Enqueue(e.ctx, store.JobSpec{Repo: "acme/llm", Tier: "quick", HeadSHA: sha40("e")}); err != nil {
		t.Fatal(err)
	}
	woken(ch, "queued a job")
	if _, err := one.Claim(e.ctx, store.ClaimRequest{Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	ch = one.Notify()
	if got, err := two.ReapExpired(e.ctx); err != nil || len(got) != 1 {
		t.Fatalf("reap = %v, %v", got, err)
	}
	woken(ch, "requeued a lost job")
}
