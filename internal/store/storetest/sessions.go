package storetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Sign-in sessions live in the database: a second replica (another store
// handle) finds a session the first created, sees its rotation and its
// deletion; a rotated-away id lasts only its grace; an expired session is
// refused and purged; two replicas rotating one session at once agree on
// one new id.
func testSessions(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	one, two := e.st, e.open(t)
	now := e.clock.Now()
	sealed := []byte{0x01, 0x02, 0x03, 0x00, 0xff}
	created, err := one.CreateSession(e.ctx, "hash-a", store.Session{Login: "alice", TokenSealed: sealed, CreatedAt: now, ExpiresAt: now.Add(8 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.CreateSession(e.ctx, "hash-a", store.Session{Login: "mallory", TokenSealed: sealed, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err == nil {
		t.Error("a second session under the same token hash was stored")
	}
	got, err := two.SessionByToken(e.ctx, "hash-a", now.Add(time.Minute))
	if err != nil {
		t.Fatalf("the other replica: %v", err)
	}
	if got.ID != created.ID || got.Login != "alice" || !bytes.Equal(got.TokenSealed, sealed) ||
		!got.CreatedAt.Equal(now) || !got.RotatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(8*time.Hour)) {
		t.Errorf("the other replica read %+v, want %+v", got, created)
	}
	if _, err := two.SessionByToken(e.ctx, "hash-b", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown token: %v, want ErrNotFound", err)
	}

	// Rotation on two replicas at once: one wins.
	at := now.Add(16 * time.Minute)
	grace := at.Add(30 * time.Second)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i, st := range []store.Store{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := []string{"hash-b", "hash-c"}[i]
			ok, err := st.RotateSession(e.ctx, created.ID, "hash-a", next, at, grace)
			if err != nil {
				t.Errorf("rotate: %v", err)
			}
			if ok {
				mu.Lock()
				wins = append(wins, next)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("rotations that won: %v, want one", wins)
	}
	current, lost := wins[0], map[string]string{"hash-b": "hash-c", "hash-c": "hash-b"}[wins[0]]
	for _, tc := range []struct {
		hash string
		at   time.Time
		want bool
	}{
		{current, at, true},
		{"hash-a", at.Add(10 * time.Second), true}, // within its grace
		{"hash-a", grace, false},                   // after it
		{lost, at, false},
		{current, now.Add(8 * time.Hour), false}, // expired
	} {
		s, err := one.SessionByToken(e.ctx, tc.hash, tc.at)
		if tc.want && (err != nil || s.ID != created.ID || !s.RotatedAt.Equal(at)) {
			t.Errorf("%s at %s: %+v, %v; want the rotated session", tc.hash, tc.at.Sub(now), s, err)
		}
		if !tc.want && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s at %s: %+v, %v; want ErrNotFound", tc.hash, tc.at.Sub(now), s, err)
		}
	}
	if ok, err := two.RotateSession(e.ctx, created.ID, "hash-a", "hash-d", at.Add(time.Second), grace); err != nil || ok {
		t.Errorf("rotating from the rotated-away id: %v, %v; want false", ok, err)
	}

	// Sign-out on one replica ends it on the other.
	if err := two.DeleteSession(e.ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := one.SessionByToken(e.ctx, current, at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after sign-out on the other replica: %v, want ErrNotFound", err)
	}

	// Purge: the expired go, the live stay.
	for i, life := range []time.Duration{time.Hour, 2 * time.Hour, 8 * time.Hour} {
		if _, err := one.CreateSession(e.ctx, "purge-"+string(rune('a'+i)), store.Session{Login: "bob", TokenSealed: sealed, CreatedAt: now, ExpiresAt: now.Add(life)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := two.PurgeSessions(e.ctx, now.Add(2*time.Hour))
	if err != nil || n != 2 {
		t.Errorf("purge at +2h: %d, %v; want 2", n, err)
	}
	if _, err := one.SessionByToken(e.ctx, "purge-c", now.Add(2*time.Hour)); err != nil {
		t.Errorf("the live session after the purge: %v", err)
	}
	if n, err := one.PurgeSessions(e.ctx, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Errorf("a second purge: %d, %v; want 0", n, err)
	}
}
