package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// registerGate stands in front of the agent API. While armed, a
// registration reaches the server, which applies it; then the gate says
// so on applied and holds the answer until release is closed — or, with
// drop, loses it (the connection closes without an answer). Every other
// call goes straight through.
type registerGate struct {
	next    http.Handler
	armed   atomic.Bool
	drop    bool
	applied chan struct{}
	release chan struct{}
}

func (g *registerGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/agents/register" || !g.armed.CompareAndSwap(true, false) {
		g.next.ServeHTTP(w, r)
		return
	}
	// The server applies the registration whatever the runner does next.
	rec := httptest.NewRecorder()
	g.next.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
	close(g.applied)
	if g.drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	select {
	case <-g.release:
	case <-r.Context().Done():
		return // the runner hung up: its answer is lost
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// gatedServer is an agent API on a fresh store behind a registerGate.
func gatedServer(t *testing.T) (*registerGate, store.Store, string) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	g := &registerGate{next: agentserver.NewServer(st, agentserver.Options{RegistrationToken: regToken, Lease: 10 * time.Second, LongPoll: time.Second}),
		applied: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(g)
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return g, st, srv.URL
}

// runUntil runs an agent until until() holds, then stops it; an agent
// that gives up first fails the test at once.
func runUntil(t *testing.T, a *agent.Agent, until func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var early error
	stopped := false
	poll.Until(t, "the agent to call in", func() bool {
		select {
		case early = <-done:
			stopped = true
			return true
		default:
			return until()
		}
	})
	if stopped {
		t.Fatalf("the agent stopped before calling in: %v", early)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
}

// savedToken is the agent token the state directory holds.
func savedToken(t *testing.T, stateDir string) (token, pending string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Token        string `json:"token"`
		PendingToken string `json:"pending_token"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Token, st.PendingToken
}

// heldHash is the token hash the server holds for the one agent.
func heldHash(t *testing.T, st store.Store) string {
	t.Helper()
	agents, err := st.ListAgents(context.Background())
	if err != nil || len(agents) != 1 {
		t.Fatalf("agents: %d, %v; want 1", len(agents), err)
	}
	return agents[0].TokenHash
}

// A restarted runner whose registration again is interrupted — stopped
// while its answer is on the way, or the answer lost — ends with the token
// the server holds, and a later start without a registration token calls
// in with it. Before the fix the runner kept the replaced token: the next
// start was refused (401) for good, or its retried registration was
// refused (409), and TestCardsAtRegistration hung under load.
func TestReregistrationInterrupted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		drop bool // the answer is lost (else the runner stops while it is on the way)
	}{
		{"stopped while the answer is on the way", false},
		{"answer lost, registration retried", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, st, url := gatedServer(t)
			g.drop = tt.drop
			stateDir := filepath.Join(t.TempDir(), "state")
			card := gpu.NewFake("GPU-r1")
			newAgent := func(reg string) *agent.Agent {
				a, err := agent.New(agent.Config{Server: url, RegistrationToken: reg, Name: "box", Labels: []string{"gpu"}, StateDir: stateDir,
					GPU: gpu.NewFakeProvider(card), CacheDir: t.TempDir(), Docker: "no-docker-here", ClaimWait: 100 * time.Millisecond,
					Backoff: agentapi.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			run := func(a *agent.Agent, until func() bool) { t.Helper(); runUntil(t, a, until) }
			seenSince := func(since time.Time) func() bool {
				return func() bool {
					agents, err := st.ListAgents(context.Background())
					return err == nil && len(agents) == 1 && agents[0].LastSeenAt.After(since)
				}
			}
			run(newAgent(regToken), seenSince(time.Time{}))
			first, _ := savedToken(t, stateDir)

			// A driver upgrade: the restart registers again, and the
			// registration is interrupted after the server applied it.
			card.SetInfo(func(i *gpu.Info) { i.Driver = "555.42.02" })
			g.armed.Store(true)
			if tt.drop {
				// Until the runner saved the token the server holds: the
				// retried registration's answer came.
				run(newAgent(regToken), func() bool {
					tok, _ := savedToken(t, stateDir)
					held := heldHash(t, st)
					return held != store.HashToken(first) && held == store.HashToken(tok)
				})
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				a := newAgent(regToken)
				go func() { done <- a.Run(ctx) }()
				<-g.applied
				cancel() // the runner stops while the answer is held
				close(g.release)
				if err := <-done; err != nil {
					t.Fatalf("agent: %v", err)
				}
			}
			tok, pending := savedToken(t, stateDir)
			if held := heldHash(t, st); store.HashToken(tok) != held || held == store.HashToken(first) {
				t.Fatalf("the runner saved a token the server does not hold (saved %s, first %s, pending %q)", tok[:10], first[:10], pending)
			}
			// A start without a registration token uses it.
			before := time.Now()
			run(newAgent(""), seenSince(before))
		})
	}
}

// A runner that stopped after sending a registration and before its
// answer (killed, say) saved the token it proposed: on its next start it
// ends with whichever token the server holds, with or without a
// registration token.
func TestPendingRegistrationOnRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		reg           string
		serverApplied bool // the server applied the pending registration
	}{
		{"applied, no registration token", "", true},
		{"applied, registration token", regToken, true},
		{"not applied, registration token", regToken, false},
		{"not applied, no registration token", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st, url := gatedServer(t)
			stateDir := filepath.Join(t.TempDir(), "state")
			card := gpu.NewFake("GPU-p1")
			cfg := agent.Config{Server: url, RegistrationToken: regToken, Name: "box", Labels: []string{"gpu"}, StateDir: stateDir,
				GPU: gpu.NewFakeProvider(card), CacheDir: t.TempDir(), Docker: "no-docker-here", ClaimWait: 100 * time.Millisecond, Log: zerolog.Nop()}
			runUntilSeen := func(cfg agent.Config) {
				t.Helper()
				a, err := agent.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				before := time.Now()
				// Called in, and the token saved is the one the server holds
				// (a call the stop cuts short does not settle which).
				runUntil(t, a, func() bool {
					agents, err := st.ListAgents(context.Background())
					if err != nil || len(agents) != 1 || !agents[0].LastSeenAt.After(before) {
						return false
					}
					tok, _ := savedToken(t, stateDir)
					return store.HashToken(tok) == agents[0].TokenHash
				})
			}
			runUntilSeen(cfg)
			old, _ := savedToken(t, stateDir)

			// The state as a runner killed mid-registration leaves it: the
			// identity in use and the token it proposed.
			pending, err := agentapi.NewToken()
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(stateDir, "agent.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			raw["pending_token"] = pending
			if b, err = json.Marshal(raw); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.serverApplied {
				if _, err := st.RegisterAgent(context.Background(), store.AgentRegistration{Name: "box", Labels: []string{"gpu"},
					TokenHash: store.HashToken(pending), PreviousTokenHash: store.HashToken(old)}); err != nil {
					t.Fatal(err)
				}
			}
			cfg.RegistrationToken = tt.reg
			runUntilSeen(cfg)
			tok, _ := savedToken(t, stateDir)
			if held := heldHash(t, st); store.HashToken(tok) != held {
				t.Fatalf("the runner saved a token the server does not hold")
			}
			if want := map[bool]string{true: pending, false: old}[tt.serverApplied]; tok != want {
				t.Errorf("saved token: the %s one, want the %s one", name(tok, old, pending), name(want, old, pending))
			}
		})
	}
}

func name(tok, old, pending string) string {
	switch tok {
	case old:
		return "old"
	case pending:
		return "pending"
	}
	return "new"
}
