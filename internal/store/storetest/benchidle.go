package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// BenchIdleClaims is the cost of runners no queued job is for: jobs
// queued jobs all ask for a100 runners; agents registered h100 runners
// poll for work through one store handle (a server's pool of 16
// connections) from 64 goroutines, each poll an empty claim. It reports
// the polls per second and their latency percentiles; a claim that walks
// the queue pays for every queued job on every poll.
func BenchIdleClaims(b *testing.B, dsn string, agents, jobs int) {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		b.Fatalf("open %s: %v", dsn, err)
	}
	defer st.Close()
	reqs := make([]store.ClaimRequest, agents)
	for i := range agents {
		gpu := fmt.Sprintf("GPU-%04d", i)
		a, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: fmt.Sprintf("idle-%04d", i), Labels: []string{"gpu", "h100"},
			GPUUUIDs: []string{gpu}, TokenHash: store.HashToken(gpu)})
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Minute}
	}
	for i := range jobs {
		tier := []string{"quick", "quick", "nightly", "merge"}[i%4]
		if _, err := st.Enqueue(ctx, store.JobSpec{Repo: repoName(i % 50), Tier: tier, HeadSHA: sha40("d"), PRNumber: i + 1,
			Labels: []string{"gpu", "a100"}}); err != nil {
			b.Fatal(err)
		}
	}
	const workers = 64
	b.ResetTimer()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					break
				}
				t0 := time.Now()
				_, err := st.Claim(ctx, reqs[n%int64(agents)])
				mine = append(mine, time.Since(t0))
				if !errors.Is(err, store.ErrNoJob) {
					b.Errorf("idle claim: %v, want ErrNoJob", err)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "polls/s")
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
