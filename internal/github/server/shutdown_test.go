package server

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

// closeGuard is the real store with a watch on its closing: the
// reconciler's first read stays inside the store until the workers'
// context ends, and closing the store while a call is inside it is
// recorded.
type closeGuard struct {
	store.Store
	entered chan struct{} // closed when the reconciler's first read is inside
	once    sync.Once

	mu       sync.Mutex
	inside   int
	closedIn int // calls inside the store when it was closed
}

func (g *closeGuard) ListOpenCheckRuns(ctx context.Context) ([]store.CheckRun, error) {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.Store.ListOpenCheckRuns(ctx)
	}
	g.mu.Lock()
	g.inside++
	g.mu.Unlock()
	close(g.entered)
	<-ctx.Done()
	// A worker finishes its last store call a little after its context
	// ends (a query returning, a row being written). The pause widens that
	// window so a shutdown that does not wait for its workers closes the
	// store inside it; a shutdown that waits passes however long it is.
	time.Sleep(20 * time.Millisecond)
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
	return nil, ctx.Err()
}

func (g *closeGuard) Close() error {
	g.mu.Lock()
	g.closedIn = g.inside
	g.mu.Unlock()
	return g.Store.Close()
}

// TestShutdownDrainsWorkers: Launch returns only after every background
// worker has returned, so the store its caller closes next is never closed
// under a running worker.
func TestShutdownDrainsWorkers(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	guard := &closeGuard{Store: st, entered: make(chan struct{})}
	cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, AppSlug: githubtest.AppSlug, Loop: fastLoop()}
	cfg.ChangePoints.Disabled = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	launched := make(chan error, 1)
	go func() { launched <- Launch(ctx, cfg, Prepared{}, guard, ln, zerolog.Nop()) }()

	select {
	case <-guard.entered:
	case err := <-launched:
		t.Fatalf("Launch returned before the reconciler read the store: %v", err)
	}
	cancel()
	if err := <-launched; err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := guard.Close(); err != nil {
		t.Fatal(err)
	}
	if guard.closedIn != 0 {
		t.Fatalf("the store was closed with %d worker call(s) inside it: Launch returned before its workers did", guard.closedIn)
	}
}
