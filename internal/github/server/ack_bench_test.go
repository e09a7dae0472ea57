package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// BenchmarkAck measures how long GitHub waits for its 2xx: a server, its
// inbox, outbox and judge processing what arrives, receives signed
// pull_request deliveries at 50 a second, on SQLite and on PostgreSQL
// (PERFGATE_TEST_POSTGRES, default 127.0.0.1:5432; skipped when it is not
// reachable). It reports the time to the answer at p50, p99 and max, the
// answers that came after GitHub's 10 s, the answers that were not 202,
// and the host's 1-minute load average as the deliveries began and as
// they ended (on a shared host the load decides the tail). Knobs, all environment variables:
//
//	PERFGATE_BENCH_DELIVERIES  deliveries measured (default 200)
//	PERFGATE_BENCH_BACKLOG     deliveries stored before the first one, for
//	                           the workers to chew on meanwhile (default 0)
//	PERFGATE_BENCH_HOGS        spinning processes beside it (`yes`; default 0)
//	PERFGATE_BENCH_GITHUB_LATENCY  how long the fake GitHub's API takes
//	                           to answer each of the server's calls, e.g.
//	                           50ms (default 0: at once, which makes the
//	                           backlog's work all CPU)
//	PERFGATE_BENCH_SERVER_NICE the server process's nice value (e.g. -10,
//	                           which needs root; default: this process's)
//	PERFGATE_BENCH_SERVER_LOG  a file to keep the server process's log in
//
// The server runs as in production: a process of its own (this test
// binary re-run as perfgate serve's start, ackServe), with the production
// loop timing and collector target (TuneGC; GOGC=100 for Go's default),
// logging at info level to a file, and its door (door.go: the process
// that owns the port and answers the webhooks; PERFGATE_WEBHOOK_DOOR=off
// has the server's process answer them, as before the door). GitHub — the fake one answering the
// server's API calls, and the deliveries' sender — is this process, as
// GitHub is off perfgate's host.
//
//	PERFGATE_BENCH_SERVER=inprocess  the server in this process instead,
//	                                 beside the fake GitHub and the load,
//	                                 at the tests' loop timing (the
//	                                 benchmark before issue 37's last
//	                                 step; its tail is this process's
//	                                 run queue)
//
//	go test -run XXX -bench Ack -benchtime 1x ./internal/github/server
func BenchmarkAck(b *testing.B) {
	n := envInt("PERFGATE_BENCH_DELIVERIES", 200)
	backlog := envInt("PERFGATE_BENCH_BACKLOG", 0)
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			for b.Loop() {
				dsn := filepath.Join(b.TempDir(), "perfgate.db")
				if db == "postgres" {
					dsn = storetest.PostgresDSN(b)
				}
				ackRun(b, dsn, n, backlog)
			}
		})
	}
}

func ackRun(b *testing.B, dsn string, n, backlog int) {
	const rate = 50
	l := &loop{t: b, gh: ghtest.New(b), dsn: dsn, prs: map[int]string{}, instance: "bench"}
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# the defaults\n"))
	bodies := make([][]byte, backlog+n)
	for i := range bodies {
		bodies[i] = l.addPR(1000 + i)
	}
	if backlog > 0 {
		// The backlog is stored before the server starts, as after an
		// outage: its workers start on it at once.
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		for i := range backlog {
			if _, err := st.AcceptDelivery(context.Background(), fmt.Sprintf("backlog-%d", i), "pull_request", bodies[i], store.DeliveryOrder{}); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
	}
	inProcess := os.Getenv("PERFGATE_BENCH_SERVER") == "inprocess"
	if inProcess {
		// The server in this process, beside the fake GitHub and the
		// load, at the tests' loop timing; the collector as perfgate
		// serve runs it (GOGC overrides it).
		defer debug.SetGCPercent(debug.SetGCPercent(100))
		TuneGC()
		l.start()
		defer l.kill()
	} else {
		url, stop := startAckServer(b, l.gh, dsn)
		defer stop()
		l.url = url
	}
	// The hog is other processes, as on a shared host.
	var hogProcs []*exec.Cmd
	for range envInt("PERFGATE_BENCH_HOGS", 0) {
		c := exec.Command("sh", "-c", "exec yes > /dev/null")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		hogProcs = append(hogProcs, c)
	}
	defer func() {
		for _, c := range hogProcs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	loadStart := loadAverage(b)
	var (
		lats  []time.Duration
		codes []int
	)
	if inProcess {
		lats, codes = sendInProcess(l, bodies[backlog:], rate)
	} else {
		lats, codes = sendFromProcess(b, l.url, bodies[backlog:], rate)
	}
	loadEnd := loadAverage(b)
	other := 0
	for _, c := range codes {
		if c != http.StatusAccepted {
			other++
		}
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	late := 0
	for _, d := range lats {
		if d > 10*time.Second {
			late++
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
	b.ReportMetric(ms(lats[len(lats)*99/100]), "p99-ms")
	b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
	b.ReportMetric(float64(late), "after-10s")
	b.ReportMetric(float64(other), "not-202")
	// What the server's workers did meanwhile: GitHub API calls served.
	b.ReportMetric(float64(len(l.gh.Requests())), "github-calls")
	b.ReportMetric(loadStart, "load-start")
	b.ReportMetric(loadEnd, "load-end")
}

// sendInProcess posts the deliveries from this process, rate a second,
// and returns each one's time to its answer and status.
func sendInProcess(l *loop, bodies [][]byte, rate int) ([]time.Duration, []int) {
	return paced(bodies, rate, func(i int, body []byte) int {
		return l.deliver("pull_request", fmt.Sprintf("ack-%d", i), body)
	})
}

// paced sends each body, rate a second, each from its own goroutine as
// GitHub sends them, and returns each send's time to its answer and the
// status send returned.
func paced(bodies [][]byte, rate int, send func(i int, body []byte) int) ([]time.Duration, []int) {
	lats, codes := make([]time.Duration, len(bodies)), make([]int, len(bodies))
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i, body := range bodies {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			codes[i] = send(i, body)
			lats[i] = time.Since(t0)
		}()
	}
	tick.Stop()
	wg.Wait()
	return lats, codes
}

// loadAverage is the host's 1-minute load average (/proc/loadavg), -1
// where there is none.
func loadAverage(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Logf("load average: %v", err)
		return -1
	}
	var one float64
	if _, err := fmt.Sscan(string(raw), &one); err != nil {
		b.Logf("load average %q: %v", raw, err)
		return -1
	}
	return one
}

// envInt reads a whole number from the environment, else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}
