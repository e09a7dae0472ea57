package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

// A client that declares a body as large as the whole in-flight budget and
// trickles it holds only what it sent, so GitHub's delivery beside it is
// stored and answered 202 at once. (On main the declared size was reserved
// up front: the delivery waited 5 s and got 503, which GitHub does not
// retry by itself.)
func TestSlowBodyDoesNotStarveDeliveries(t *testing.T) {
	gh := ghtest.New(t)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken}
	cfg.HTTP.WebhookInFlightBytes = 1 << 20
	srv, err := New(cfg, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(srv.Listener(ln))
	defer hs.Close()

	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST %s HTTP/1.1\r\nHost: perfgate\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow-1\r\n"+
		"X-Hub-Signature-256: sha256=%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		app.WebhookPath, strings.Repeat("0", 64), 1<<20-1<<10)
	// The server asks for the body once it has taken budget for it.
	line, err := bufio.NewReader(slow).ReadString('\n')
	if err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("slow client's first answer: %q %v", line, err)
	}
	if _, err := slow.Write([]byte(strings.Repeat("x", 1024))); err != nil {
		t.Fatal(err)
	}

	req, err := githubtest.NewDelivery("http://"+ln.Addr().String()+app.WebhookPath, "pull_request", "legit-1",
		ghtest.Fixture(t, "pull_request/opened.json"), []byte(githubtest.WebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("GitHub's delivery beside a slow body: %d, want 202", resp.StatusCode)
	}
	if _, err := st.GetDelivery(context.Background(), "legit-1"); err != nil {
		t.Errorf("the delivery was not stored: %v", err)
	}
}

// One address holds at most its cap of connections: a further one is
// closed at once, and a slot frees when one of its connections closes.
func TestPerIPConnectionCap(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitPerIP(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	first, _ := <-accepted, <-accepted
	third := dial()
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Error("a third connection from one address was served, want it closed")
	}
	third.Close()
	first.Close() // the server ends one of the address's connections
	fourth := dial()
	(<-accepted).Close() // accepted: the slot was freed
	a.Close()
	b.Close()
	fourth.Close()
}
