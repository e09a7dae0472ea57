package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
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

// serve hands the port to perfgate door (this test binary re-run with
// "door", see TestMain): a signed delivery is answered 202 by the door
// and lands in DATA_DIR/acks, /healthz reaches the server through it,
// and the door stops with serve.
func TestServeStartsTheDoor(t *testing.T) {
	appEnv(t)
	dataDir := t.TempDir()
	logs := &lineWaiter{want: "door process started", seen: make(chan struct{})}
	started := logs.seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		env := &cliEnv{stdout: io.Discard, stderr: logs, log: zerolog.New(logs)}
		done <- runServe(ctx, env, []string{"--addr", "127.0.0.1:0", "--data-dir", dataDir, "--public-url", "https://perfgate.example.com"})
	}()
	select {
	case <-started:
	case code := <-done:
		t.Fatalf("serve exited %d before its door started:\n%s", code, logs)
	}
	addr := regexp.MustCompile(`"addr":"([^"]+)".*"message":"perfgate server listening"`).FindStringSubmatch(logs.String())
	pid := regexp.MustCompile(`"pid":(\d+),"message":"door process started`).FindStringSubmatch(logs.String())
	if addr == nil || pid == nil {
		t.Fatalf("no address or door pid in the log:\n%s", logs)
	}
	body := []byte(`{"action":"opened","number":1}`)
	req, err := githubtest.NewDelivery("http://"+addr[1]+"/api/github/hook", "pull_request", "serve-door-1", body, []byte(testWebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the door answered %d, want 202", resp.StatusCode)
	}
	segments, _ := filepath.Glob(filepath.Join(dataDir, "acks", "*"))
	if len(segments) == 0 {
		t.Error("DATA_DIR/acks holds no journal segment")
	}
	if resp, err := http.Get("http://" + addr[1] + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz through the door: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, logs)
	}
	n, _ := strconv.Atoi(pid[1])
	if syscall.Kill(n, 0) == nil {
		t.Errorf("the door (pid %d) outlived serve", n)
	}
}

// testWebhookSecret is the secret appEnv gives the app.
const testWebhookSecret = "0123456789abcdef0123456789abcdef"

// appEnv clears every setting and gives serve an app's credentials.
func appEnv(t *testing.T) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range server.Settings {
		t.Setenv(s.Env, "")
	}
	t.Setenv("PERFGATE_CONFIG", "")
	t.Setenv("PERFGATE_GITHUB_APP_INTEGRATION_ID", "123456")
	t.Setenv("PERFGATE_GITHUB_APP_WEBHOOK_SECRET", testWebhookSecret)
	t.Setenv("PERFGATE_GITHUB_APP_PRIVATE_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})))
	t.Setenv("PERFGATE_AGENT_REGISTRATION_TOKEN", "0123456789abcdef0123456789abcdef")
}

// serve warns at start, once, when PERFGATE_PUBLIC_URL is unset (with the
// app's credentials given it starts without it, but every check run links
// to it), and says nothing when it is set.
func TestServeWarnsWithoutPublicURL(t *testing.T) {
	appEnv(t)
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
