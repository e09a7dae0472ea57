package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// BenchQueue enqueues jobs on a fresh database at dsn, then lets claimers
// goroutines — the agents — claim and finish until the queue is empty, and
// reports claim→done throughput (jobs/s) and claim latency percentiles.
// Enqueueing is outside the timer.
func BenchQueue(b *testing.B, dsn string, claimers, jobs int) {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		b.Fatalf("open %s: %v", dsn, err)
	}
	defer st.Close()
	for b.Loop() {
		b.StopTimer()
		for i := range jobs {
			if _, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "quick", PRNumber: i + 1,
				HeadSHA: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Labels: []string{"gpu"}}); err != nil {
				b.Fatalf("enqueue: %v", err)
			}
		}
		var (
			mu    sync.Mutex
			lats  = make([]time.Duration, 0, jobs)
			wg    sync.WaitGroup
			fails = make(chan error, claimers)
		)
		b.StartTimer()
		start := time.Now()
		for range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := make([]time.Duration, 0, jobs/claimers+1)
				defer func() { mu.Lock(); lats = append(lats, local...); mu.Unlock() }()
				for {
					t0 := time.Now()
					j, err := st.Claim(ctx, store.ClaimRequest{Labels: []string{"gpu", "h100"}, Lease: time.Minute})
					if errors.Is(err, store.ErrNoJob) {
						return
					}
					if err != nil {
						fails <- err
						return
					}
					local = append(local, time.Since(t0))
					if _, err := st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
						fails <- fmt.Errorf("finish %d: %w", j.ID, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(fails)
		for err := range fails {
			b.Fatal(err)
		}
		if len(lats) != jobs {
			b.Fatalf("claimed %d jobs, want %d", len(lats), jobs)
		}
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		pct := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))].Microseconds()) / 1000 }
		b.ReportMetric(float64(jobs)/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(pct(0.50), "p50-claim-ms")
		b.ReportMetric(pct(0.99), "p99-claim-ms")
		b.StartTimer()
	}
}
