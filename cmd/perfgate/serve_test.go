package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/server"
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

// serve warns at start, once, when PERFGATE_PUBLIC_URL is unset (with the
// app's credentials given it starts without it, but every check run links
// to it), and says nothing when it is set.
func TestServeWarnsWithoutPublicURL(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range server.Settings {
		t.Setenv(s.Env, "")
	}
	t.Setenv("PERFGATE_CONFIG", "")
	t.Setenv("PERFGATE_GITHUB_APP_INTEGRATION_ID", "123456")
	t.Setenv("PERFGATE_GITHUB_APP_WEBHOOK_SECRET", "0123456789abcdef0123456789abcdef")
	t.Setenv("PERFGATE_GITHUB_APP_PRIVATE_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})))
	t.Setenv("PERFGATE_AGENT_REGISTRATION_TOKEN", "0123456789abcdef0123456789abcdef")
	const warning = "PERFGATE_PUBLIC_URL (server.yml public_url) is not set"
	for _, tt := range []struct {
		name  string
		args  []string
		warns int
	}{
		{"unset", nil, 1},
		{"--public-url", []string{"--public-url", "https://perfgate.example.com"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &lineWaiter{want: "perfgate server listening", seen: make(chan struct{})}
			listening := logs.seen
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			go func() {
				env := &cliEnv{stdout: io.Discard, stderr: logs, log: zerolog.New(logs)}
				done <- runServe(ctx, env, append([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tt.args...))
			}()
			select {
			case <-listening:
			case code := <-done:
				t.Fatalf("serve exited %d before listening:\n%s", code, logs)
			}
			cancel()
			<-done
			if n := strings.Count(logs.String(), warning); n != tt.warns {
				t.Errorf("%d warnings %q, want %d:\n%s", n, warning, tt.warns, logs)
			}
		})
	}
}
