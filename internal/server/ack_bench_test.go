package server

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/githubtest/ghtest"
)

// BenchmarkWebhookAck measures how long GitHub waits for its 2xx: a server
// on SQLite, its inbox, outbox and judge processing what arrives, receives
// 50 pull_request deliveries a second for 4 s while a CPU hog (one `yes`
// process per CPU, PERFGATE_BENCH_HOGS to change) runs beside it. It reports the time to the answer at p50, p99 and
// max, and how many answers were not 202.
//
//	go test -run XXX -bench WebhookAck -benchtime 1x ./internal/server
func BenchmarkWebhookAck(b *testing.B) {
	const (
		rate = 50
		n    = 4 * rate
	)
	for b.Loop() {
		l := &loop{t: b, gh: ghtest.New(b), dsn: filepath.Join(b.TempDir(), "perfgate.db"), prs: map[int]string{}, instance: "bench"}
		l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("# the defaults\n"))
		l.start()
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = l.addPR(1000 + i)
		}
		// The hog is other processes, as on a shared host: one spinning
		// process per CPU.
		var hogProcs []*exec.Cmd
		for range hogs() {
			c := exec.Command("sh", "-c", "exec yes > /dev/null")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			hogProcs = append(hogProcs, c)
		}
		var (
			mu    sync.Mutex
			lats  []time.Duration
			other int
			wg    sync.WaitGroup
		)
		tick := time.NewTicker(time.Second / rate)
		for i, body := range bodies {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				code := l.deliver("pull_request", fmt.Sprintf("ack-%d", i), body)
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				lats = append(lats, d)
				if code != http.StatusAccepted {
					other++
				}
			}()
		}
		tick.Stop()
		wg.Wait()
		for _, c := range hogProcs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		l.kill()
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
		b.ReportMetric(ms(lats[len(lats)*99/100]), "p99-ms")
		b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
		b.ReportMetric(float64(other), "not-202")
	}
}

// hogs is the number of spinning goroutines (PERFGATE_BENCH_HOGS, default
// one per CPU).
func hogs() int {
	if v, err := strconv.Atoi(os.Getenv("PERFGATE_BENCH_HOGS")); err == nil {
		return v
	}
	return runtime.NumCPU()
}
