package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// doorEnv, set to 1, makes this test binary a door process (testDoor),
// as perfgate door is one: the tests' and the benchmark's servers start
// it through Config.Door.
const doorEnv = "PERFGATE_TEST_DOOR"

// testDoor is perfgate door (cmd/perfgate's runDoor) for this test binary.
func testDoor() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := DoorMain(ctx, os.Stdout, zerolog.New(os.Stderr)); err != nil {
		os.Stderr.WriteString("test door: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// testDoorCommand runs this test binary as the door.
func testDoorCommand() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), doorEnv+"=1")
	return cmd
}

// launchWithDoor serves the full server (the fake GitHub's app
// credentials, SQLite in dataDir) with its door, as perfgate serve does;
// the server stops when the test ends, and the test fails if a door
// outlives it.
func launchWithDoor(t *testing.T, gh *githubtest.Server, dataDir string) (base string, st store.Store, logs *syncWriter) {
	t.Helper()
	// Registered first, so it runs after the server has stopped.
	t.Cleanup(func() {
		if logs == nil {
			return
		}
		for _, pid := range doorPIDs(logs.String()) {
			if syscall.Kill(pid, 0) == nil {
				t.Errorf("door process %d outlived its server", pid)
			}
		}
	})
	gc := gh.AppConfig()
	base, _, st, logs = launchWith(t, gh, dataDir, map[string]string{
		"PERFGATE_APP_SLUG":                   githubtest.AppSlug,
		"PERFGATE_AGENT_REGISTRATION_TOKEN":   testToken,
		"PERFGATE_GITHUB_WEB_URL":             gc.WebURL,
		"PERFGATE_GITHUB_V3_API_URL":          gc.V3APIURL,
		"PERFGATE_GITHUB_V4_API_URL":          gc.V4APIURL,
		"PERFGATE_GITHUB_APP_INTEGRATION_ID":  strconv.FormatInt(gc.App.IntegrationID, 10),
		"PERFGATE_GITHUB_APP_WEBHOOK_SECRET":  gc.App.WebhookSecret,
		"PERFGATE_GITHUB_APP_PRIVATE_KEY":     gc.App.PrivateKey,
		"PERFGATE_GITHUB_OAUTH_CLIENT_ID":     "Iv1.doortest",
		"PERFGATE_GITHUB_OAUTH_CLIENT_SECRET": "door-test-client-secret",
	}, func(cfg *Config) {
		cfg.Loop = fastLoop()
		cfg.Door = testDoorCommand
	})
	if err := poll.UntilContext(poll.Context(t), func() bool { return len(doorPIDs(logs.String())) > 0 }); err != nil {
		t.Fatalf("no door process started (%v); the server's log:\n%s", err, logs)
	}
	return base, st, logs
}

var doorStarted = regexp.MustCompile(`"pid":(\d+),"message":"door process started`)

// doorPIDs are the door processes the server's log says it started.
func doorPIDs(log string) []int {
	var pids []int
	for _, m := range doorStarted.FindAllStringSubmatch(log, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// The door end to end: deliveries are answered by a process other than
// the server's, land in the journal, and are processed once each by the
// server; a redelivery is not processed again; every other route reaches
// the server through the door; the server's metrics count the door's
// answers; a door killed outright is replaced, and a delivery sent
// meanwhile waits in the kernel's queue and is answered, not refused; the
// door stops with the server.
func TestDoorAnswersWebhooksAndPassesTheRest(t *testing.T) {
	gh := ghtest.New(t)
	gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# the defaults\n"))
	dataDir := filepath.Join(t.TempDir(), "state")
	base, st, logs := launchWithDoor(t, gh, dataDir)
	l := &loop{t: t, gh: gh, prs: map[int]string{}, url: base}

	processed := func(id string) bool {
		d, err := st.GetDelivery(context.Background(), id)
		return err == nil && d.Status == store.DeliveryDone
	}
	first := l.addPR(1)
	if code := l.deliver("pull_request", "door-1", first); code != http.StatusAccepted {
		t.Fatalf("delivery answered %d, want 202", code)
	}
	if err := poll.UntilContext(poll.Context(t), func() bool { return processed("door-1") }); err != nil {
		t.Fatalf("the door's delivery was not processed (%v); the server's log:\n%s", err, logs)
	}
	segments, _ := filepath.Glob(filepath.Join(JournalDir(Config{DataDir: dataDir}), "*"))
	if len(segments) == 0 {
		t.Fatal("the journal directory holds no segment: the delivery did not come through the door")
	}
	checks := func() int {
		n := 0
		for _, c := range gh.CheckRuns() {
			if c.HeadSHA == l.prs[1] {
				n++
			}
		}
		return n
	}
	poll.Until(t, "a check run for the door's delivery", func() bool { return checks() > 0 })
	before := checks()
	// GitHub's "Redeliver": the door cannot tell, the store can.
	if code := l.deliver("pull_request", "door-1", first); code != http.StatusAccepted {
		t.Fatalf("redelivery answered %d, want 202", code)
	}

	// Every other route is the server's, through the door.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s through the door: %d", path, resp.StatusCode)
		}
	}

	// What a TLS proxy in front says of the client reaches the server:
	// sign-in's cookie is Secure when it said https, and only then.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, proto := range []string{"https", ""} {
		req, err := http.NewRequest(http.MethodGet, base+"/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Header.Values("Set-Cookie")
		if resp.StatusCode != http.StatusFound || len(cookies) == 0 {
			t.Fatalf("GET /login through the door (X-Forwarded-Proto %q): %d, cookies %q", proto, resp.StatusCode, cookies)
		}
		if secure := strings.Contains(strings.Join(cookies, "\n"), "; Secure"); secure != (proto == "https") {
			t.Errorf("X-Forwarded-Proto %q through the door: sign-in's cookies %q", proto, cookies)
		}
	}

	// A door killed outright is replaced; a delivery sent meanwhile is
	// answered by the next one.
	pid := doorPIDs(logs.String())[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := l.addPR(2)
	if code := l.deliver("pull_request", "door-2", second); code != http.StatusAccepted {
		t.Fatalf("delivery after the door's death answered %d, want 202", code)
	}
	if pids := doorPIDs(logs.String()); len(pids) != 2 {
		t.Fatalf("door processes started: %v, want the first and its replacement", pids)
	}
	poll.Until(t, "the delivery after the door's death to be processed", func() bool { return processed("door-2") })
	// The redelivery of door-1 was folded (it came before door-2 in the
	// journal) and did not run the handler again.
	if n := checks(); n != before {
		t.Errorf("PR 1's check runs went from %d to %d after its redelivery: processed twice", before, n)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `perfgate_webhook_deliveries_total{event="pull_request",outcome="accepted"} 3`; !strings.Contains(string(raw), want) {
		t.Errorf("/metrics lacks %s (the door's answers, told to the server):\n%s", want, grepLines(string(raw), "perfgate_webhook_deliveries_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A door given incomplete settings refuses to serve, saying what is
// missing.
func TestServeDoorRefusesIncompleteSettings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = ServeDoor(context.Background(), strings.NewReader(`{"journal_dir":"/tmp/x","upstream":"/tmp/s"}`), ln, io.Discard, io.Discard, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "webhook secret") {
		t.Fatalf("ServeDoor without a secret: %v", err)
	}
}
