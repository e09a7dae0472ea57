package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/poll"
)

// rawPost opens a connection and sends a webhook request's headers
// declaring length bytes, then body; it returns the connection.
func rawPost(t *testing.T, addr, id string, length int, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: %s\r\n"+
		"X-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n%s", WebhookPath, id, strings.Repeat("0", 64), length, body)
	return c
}

func status(t *testing.T, c net.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Unauthenticated bodies are bounded across connections: while slow
// clients hold the in-flight budget, more deliveries wait and are refused
// with 503 (GitHub's redelivery brings them back), and a body that
// trickles is cut off at the read deadline, which frees its share.
func TestInFlightBudgetAndSlowBodies(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxInFlightBytes = 64 << 10
		c.MaxBodyBytes = 48 << 10
		// The second delivery's wait must end while the slow body still
		// holds its budget: 2 s against 50 ms leaves a loaded machine a
		// wide margin.
		c.BodyReadTimeout = 2 * time.Second
		c.InFlightWait = 50 * time.Millisecond
	})
	srv := httptest.NewServer(h.app.Handler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	slow := rawPost(t, addr, "slow", 48<<10, "{") // holds 48 KiB of budget, sends 1 byte
	defer slow.Close()
	// Once the slow delivery holds its share, not after a guessed pause.
	poll.Until(t, "the slow delivery to hold its budget", func() bool {
		if h.app.webhooks.budget.TryAcquire(20 << 10) {
			h.app.webhooks.budget.Release(20 << 10)
			return false
		}
		return true
	})
	second := rawPost(t, addr, "second", 20<<10, strings.Repeat(" ", 20<<10))
	defer second.Close()
	if got := status(t, second); got != http.StatusServiceUnavailable {
		t.Errorf("delivery over the in-flight budget: %d, want 503", got)
	}
	if got := status(t, slow); got != http.StatusBadRequest {
		t.Errorf("trickling body: %d, want 400 after the read deadline", got)
	}
	third := rawPost(t, addr, "third", 20<<10, strings.Repeat(" ", 20<<10))
	defer third.Close()
	if got := status(t, third); got != http.StatusUnauthorized {
		t.Errorf("after the slow body was cut: %d, want 401 (read, then refused for its signature)", got)
	}
}

// A signed body is verified while it is read and stored; a bad one is
// refused before it is stored, however large.
func TestStreamedSignature(t *testing.T) {
	h := newHarness(t)
	body := ghtest.Fixture(t, "pull_request/opened.json")
	req, _ := githubtest.NewDelivery("http://x"+WebhookPath, "pull_request", "ok-1", body, []byte(githubtest.WebhookSecret))
	rec := httptest.NewRecorder()
	h.app.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted || string(h.inbox.pending["ok-1"].payload) != string(body) {
		t.Fatalf("signed delivery: %d, stored %d bytes", rec.Code, len(h.inbox.pending["ok-1"].payload))
	}
	bad := append([]byte{}, body...)
	bad[10] ^= 1
	req, _ = githubtest.NewDelivery("http://x"+WebhookPath, "pull_request", "bad-1", bad, nil)
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign([]byte(githubtest.WebhookSecret), body))
	rec = httptest.NewRecorder()
	h.app.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || len(h.inbox.pending) != 1 {
		t.Errorf("tampered body: %d, %d stored", rec.Code, len(h.inbox.pending))
	}
}
