package agentserver_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// BenchmarkLongPoll measures what 100 agents long-polling an empty queue
// cost the server: heap in use and goroutines while every claim waits.
// The clients run in the same process, so RSS includes their side too.
func BenchmarkLongPoll(b *testing.B) {
	const agents = 100
	for range b.N {
		_, ts := newServer(b, agentserver.Options{LongPoll: 3 * time.Second})
		tr := &http.Transport{MaxIdleConnsPerHost: agents}
		tokens := make([]string, agents)
		for i := range tokens {
			tokens[i] = registerB(b, ts.URL, fmt.Sprint("a", i))
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0, rss0 := runtime.NumGoroutine(), rssKiB()

		var wg sync.WaitGroup
		for _, tok := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: tok, HTTP: &http.Client{Transport: tr}})
				_, _ = c.Claim(context.Background(), 3*time.Second)
			}()
		}
		time.Sleep(1500 * time.Millisecond) // every claim is now waiting
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		g1, rss1 := runtime.NumGoroutine(), rssKiB()
		wg.Wait()
		ts.Close()
		b.ReportMetric(float64(int64(during.HeapInuse)-int64(before.HeapInuse))/agents, "heap-B/poller")
		b.ReportMetric(float64(g1-g0)/agents, "goroutines/poller")
		b.ReportMetric(float64(rss1-rss0), "rss-delta-KiB")
		b.ReportMetric(float64(during.HeapInuse)/(1<<20), "heap-MiB")
	}
}

// BenchmarkClaimToDone: 50 agents claim and finish jobs through the API
// (HTTP + SQLite): jobs/s and the p99 claim latency.
func BenchmarkClaimToDone(b *testing.B) {
	const agents, jobs = 50, 1000
	for range b.N {
		st, ts := newServer(b, agentserver.Options{LongPoll: 200 * time.Millisecond})
		tr := &http.Transport{MaxIdleConnsPerHost: agents}
		ctx := context.Background()
		for i := range jobs {
			if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Repo: "o/r", PRNumber: i, Labels: []string{"gpu"}, Config: []byte(`{}`)}); err != nil {
				b.Fatal(err)
			}
		}
		var (
			mu   sync.Mutex
			lats []time.Duration
			wg   sync.WaitGroup
		)
		start := time.Now()
		for i := range agents {
			tok := registerB(b, ts.URL, fmt.Sprint("a", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _ := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: tok, HTTP: &http.Client{Transport: tr}})
				for {
					t0 := time.Now()
					j, err := c.Claim(ctx, 100*time.Millisecond)
					if err != nil || j == nil {
						return
					}
					d := time.Since(t0)
					if _, err := c.Finish(ctx, j.JobID, agentapi.FinishRequest{LeaseID: j.LeaseID, Status: "succeeded"}); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lats = append(lats, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		ts.Close()
		if len(lats) != jobs {
			b.Fatalf("%d jobs done, want %d", len(lats), jobs)
		}
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		b.ReportMetric(float64(jobs)/el.Seconds(), "jobs/s")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-claim-ms")
	}
}

func registerB(b *testing.B, url, name string) string {
	c, _ := agentapi.NewClient(agentapi.ClientConfig{Server: url, RegistrationToken: regToken, Name: name, Labels: []string{"gpu"}})
	r, err := c.Register(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return r.Token
}

func rssKiB() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
