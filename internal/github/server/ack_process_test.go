package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/logging"
	"github.com/perfgate/perfgate/internal/poll"
)

// ackServeEnv, set to 1, makes this test binary a perfgate server
// (ackServe) instead of running tests: BenchmarkAck starts the server in a
// process of its own, as perfgate serve runs in production, away from the
// fake GitHub and the load generator that stand for GitHub.
const ackServeEnv = "PERFGATE_ACK_BENCH_SERVE"

// ackListening prefixes the line on which the server process gives its
// address.
const ackListening = "perfgate-ack-server listening on "

// ackSendEnv, set to 1, makes this test binary GitHub's webhook sender
// (ackSend): the deliveries come from a process that neither serves the
// fake GitHub's API nor is the server, as GitHub's sender is neither.
const ackSendEnv = "PERFGATE_ACK_BENCH_SEND"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(doorEnv) == "1": // before the server's: a server's door inherits its environment
		os.Exit(testDoor())
	case os.Getenv(ackServeEnv) == "1":
		os.Exit(ackServe())
	case os.Getenv(ackSendEnv) == "1":
		os.Exit(ackSend())
	}
	os.Exit(m.Run())
}

// ackServe is perfgate serve's start (cmd/perfgate/serve.go: LoadConfig,
// Prepare, TuneGC, the door, Serve) with the settings from the environment and a loopback port of the system's
// choosing, which it prints on stdout. It serves until SIGTERM or SIGINT.
func ackServe() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger, err := logging.New(os.Stderr, "info")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := LoadConfig("")
	if err != nil {
		fmt.Fprintf(os.Stderr, "ack server: %v\n", err)
		return 3
	}
	prep, err := Prepare(&cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ack server: %v\n", err)
		return 3
	}
	TuneGC()
	cfg.Door = testDoorCommand // as perfgate serve runs perfgate door; PERFGATE_WEBHOOK_DOOR=off turns it off
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ack server: %v\n", err)
		return 1
	}
	fmt.Println(ackListening + ln.Addr().String())
	if err := Serve(ctx, cfg, prep, ln, logger); err != nil {
		fmt.Fprintf(os.Stderr, "ack server: %v\n", err)
		return 1
	}
	return 0
}

// startAckServer starts this test binary as a perfgate server over dsn
// and the fake GitHub gh, waits until it is ready, and returns its base
// URL and a stop (SIGTERM, then a kill after 30 s). The server logs at
// info level to a file in the benchmark's temporary directory, as
// perfgate serve logs to its journal; a failed start shows the log's end.
func startAckServer(b *testing.B, gh *githubtest.Server, dsn string) (base string, stop func()) {
	b.Helper()
	dir := b.TempDir()
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	gc := gh.AppConfig()
	if d := os.Getenv("PERFGATE_BENCH_GITHUB_LATENCY"); d != "" {
		lat, err := time.ParseDuration(d)
		if err != nil {
			b.Fatalf("PERFGATE_BENCH_GITHUB_LATENCY %q: %v", d, err)
		}
		u := distantGitHub(b, gc.WebURL, lat)
		gc.WebURL, gc.V3APIURL, gc.V4APIURL = u, u+"/", u+"/graphql"
	}
	cmd := exec.Command(os.Args[0])
	if n := os.Getenv("PERFGATE_BENCH_SERVER_NICE"); n != "" {
		// The server at another CPU priority (negative: more CPU than
		// the hogs; needs root), as a CPU weight would give it.
		cmd = exec.Command("nice", "-n", n, os.Args[0])
	}
	cmd.Env = append(os.Environ(),
		ackServeEnv+"=1",
		"PERFGATE_ADDR=127.0.0.1:0",
		"PERFGATE_DATA_DIR="+dir,
		"PERFGATE_DATABASE_URL="+dsn,
		"PERFGATE_INSTANCE=bench",
		"PERFGATE_PUBLIC_URL=http://perfgate.test",
		"PERFGATE_APP_SLUG="+githubtest.AppSlug,
		"PERFGATE_AGENT_REGISTRATION_TOKEN="+testToken,
		"PERFGATE_GITHUB_WEB_URL="+gc.WebURL,
		"PERFGATE_GITHUB_V3_API_URL="+gc.V3APIURL,
		"PERFGATE_GITHUB_V4_API_URL="+gc.V4APIURL,
		"PERFGATE_GITHUB_APP_INTEGRATION_ID="+strconv.FormatInt(gc.App.IntegrationID, 10),
		"PERFGATE_GITHUB_APP_WEBHOOK_SECRET="+gc.App.WebhookSecret,
		"PERFGATE_GITHUB_APP_PRIVATE_KEY="+gc.App.PrivateKey,
	)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the server process: %v", err)
	}
	logFile.Close()
	exited := make(chan struct{})
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if keep := os.Getenv("PERFGATE_BENCH_SERVER_LOG"); keep != "" {
			// The server's log, kept past the benchmark's directory.
			if raw, err := os.ReadFile(logPath); err == nil {
				_ = os.WriteFile(keep, raw, 0o600)
			}
		}
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), ackListening); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	fail := func(format string, a ...any) {
		stop()
		raw, _ := os.ReadFile(logPath)
		if len(raw) > 4000 {
			raw = raw[len(raw)-4000:]
		}
		b.Fatalf("the server process: "+format+"; its log ends:\n%s", append(a, raw)...)
	}
	ctx := poll.Context(b)
	select {
	case a := <-addr:
		base = "http://" + a
	case <-exited:
		fail("exited before listening (%v)", cmd.ProcessState)
	case <-ctx.Done():
		fail("not listening by the test's deadline")
	}
	if err := poll.UntilContext(ctx, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		fail("not ready: %v", err)
	}
	select {
	case <-exited:
		fail("exited before it was ready (%v)", cmd.ProcessState)
	default:
	}
	return base, stop
}

// ackSend posts the signed pull_request deliveries of the file
// PERFGATE_ACK_SEND_BODIES (one JSON body a line) to the webhook at
// PERFGATE_ACK_SEND_URL, PERFGATE_ACK_SEND_RATE a second, each from its
// own goroutine as GitHub sends them, and prints one line per delivery:
// its index, nanoseconds to the answer, and the answer's status (0 for no
// answer).
func ackSend() int {
	raw, err := os.ReadFile(os.Getenv("PERFGATE_ACK_SEND_BODIES"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ack sender: %v\n", err)
		return 1
	}
	rate, err := strconv.Atoi(os.Getenv("PERFGATE_ACK_SEND_RATE"))
	if err != nil || rate <= 0 {
		fmt.Fprintf(os.Stderr, "ack sender: PERFGATE_ACK_SEND_RATE %q: want a positive number\n", os.Getenv("PERFGATE_ACK_SEND_RATE"))
		return 1
	}
	target := os.Getenv("PERFGATE_ACK_SEND_URL") + app.WebhookPath
	bodies := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	// Signed before the clock starts, as before: the time is the answer's.
	reqs := make([]*http.Request, len(bodies))
	for i, body := range bodies {
		if reqs[i], err = githubtest.NewDelivery(target, "pull_request", fmt.Sprintf("ack-%d", i), body, []byte(githubtest.WebhookSecret)); err != nil {
			fmt.Fprintf(os.Stderr, "ack sender: %v\n", err)
			return 1
		}
	}
	lats, codes := paced(bodies, rate, func(i int, _ []byte) int {
		resp, err := http.DefaultClient.Do(reqs[i])
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	})
	w := bufio.NewWriter(os.Stdout)
	for i := range bodies {
		fmt.Fprintf(w, "%d %d %d\n", i, lats[i].Nanoseconds(), codes[i])
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "ack sender: %v\n", err)
		return 1
	}
	return 0
}

// sendFromProcess runs the sender (ackSend) over bodies at rate a second
// against the server at url and returns each delivery's time to its
// answer and status.
func sendFromProcess(b *testing.B, url string, bodies [][]byte, rate int) ([]time.Duration, []int) {
	b.Helper()
	file := filepath.Join(b.TempDir(), "bodies")
	if err := os.WriteFile(file, append(bytes.Join(bodies, []byte("\n")), '\n'), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), ackSendEnv+"=1", "PERFGATE_ACK_SEND_URL="+url,
		"PERFGATE_ACK_SEND_BODIES="+file, "PERFGATE_ACK_SEND_RATE="+strconv.Itoa(rate))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("the sender process: %v: %s", err, stderr.Bytes())
	}
	lats, codes := make([]time.Duration, len(bodies)), make([]int, len(bodies))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(bodies) {
		b.Fatalf("the sender answered %d lines for %d deliveries", len(lines), len(bodies))
	}
	for _, line := range lines {
		var i, code int
		var ns int64
		if _, err := fmt.Sscan(line, &i, &ns, &code); err != nil || i < 0 || i >= len(bodies) {
			b.Fatalf("the sender's line %q: %v", line, err)
		}
		lats[i], codes[i] = time.Duration(ns), code
	}
	return lats, codes
}

// distantGitHub fronts the fake GitHub at target with a proxy that passes
// each API call on after lat, as GitHub's API answers from across the
// network (the fake answers at once), and returns the proxy's URL.
func distantGitHub(b *testing.B, target string, lat time.Duration) string {
	b.Helper()
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// Calls cut short by the server's stop are no news.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(lat):
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
