package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// lineWaiter is a log writer that signals when a line containing want
// has been written.
type lineWaiter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A stop (SIGTERM cancels serve's context) is logged, with its reason.
func TestServeLogsShutdown(t *testing.T) {
	logs := &lineWaiter{want: "perfgate server listening", seen: make(chan struct{})}
	listening := logs.seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		env := &cliEnv{stdout: io.Discard, stderr: logs, log: zerolog.New(logs)}
		done <- runServe(ctx, env, []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--public-url", "https://perfgate.example.com"})
	}()
	select {
	case <-listening:
	case code := <-done:
		t.Fatalf("serve exited %d before listening:\n%s", code, logs)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d after the signal:\n%s", code, logs)
	}
	if !regexp.MustCompile(`"reason":"signal".*"message":"perfgate server stopped"`).MatchString(logs.String()) {
		t.Errorf("no stop logged:\n%s", logs)
	}
}
