package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// BenchFleet is the claim path of a shared fleet: jobs queued jobs over
// repos repositories (a tenth weighted 2, a tenth 3; 10% merge, 70% quick,
// 15% nightly, 5% bisect; half asking for a100 runners, half for h100, one
// in fifty pinned to a card), then agents registered runners — half of
// each model, one card each — claiming and finishing through replicas
// store handles on the same database (server replicas), until the queue
// is empty. Each replica has the default pool of 16 connections, so the
// agents' claims queue for them as long polls through the agent API do.
// It reports claims per second (claim and finish), the claim latency
// percentiles, the enqueue rate (where fair share pays: outside the timer),
// how far into the claims every repository had its first quick job, and
// the worst idle poll: the median claim of a runner that none of the
// queued jobs is for, which walks the whole queue to find nothing.
func BenchFleet(b *testing.B, dsn string, jobs, repos, agents, replicas int) {
	ctx := context.Background()
	shares := fleet.Shares{Weights: map[string]float64{}}
	for r := range repos {
		switch r % 10 {
		case 1:
			shares.Weights[repoName(r)] = 2
		case 2:
			shares.Weights[repoName(r)] = 3
		}
	}
	sts := make([]store.Store, replicas)
	for i := range sts {
		st, err := store.Open(ctx, dsn, store.WithFairShare(shares))
		if err != nil {
			b.Fatalf("open %s: %v", dsn, err)
		}
		defer st.Close()
		sts[i] = st
	}
	models := []string{"a100", "h100"}
	type runner struct {
		st  store.Store
		req store.ClaimRequest
	}
	var runners []runner
	for i := range agents {
		model := models[i%2]
		gpu := fmt.Sprintf("GPU-%04d", i)
		a, err := sts[0].RegisterAgent(ctx, store.AgentRegistration{Name: fmt.Sprintf("runner-%03d", i), Labels: []string{"gpu", model},
			GPUUUIDs: []string{gpu}, TokenHash: store.HashToken(gpu)})
		if err != nil {
			b.Fatal(err)
		}
		runners = append(runners, runner{st: sts[i%replicas], req: store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: time.Hour}})
	}
	for b.Loop() {
		b.StopTimer()
		enqStart := time.Now()
		for i := range jobs {
			tier, kind := "quick", "pull_request.synchronize"
			switch p := (i / repos) % 20; {
			case p < 2:
				tier, kind = "merge", "merge_group"
			case p < 5:
				tier, kind = "nightly", "nightly"
			case p == 5:
				kind = "bisect"
			}
			spec := store.JobSpec{Repo: repoName(i % repos), Tier: tier, Kind: kind, PRNumber: i + 1,
				HeadSHA: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Labels: []string{"gpu", models[i%2]}}
			if i%50 == 7 {
				// Pinned to a card of the right model.
				m := i % 2
				spec.GPUUUID = fmt.Sprintf("GPU-%04d", (i/50)%(agents/2)*2+m)
			}
			if _, err := sts[i%replicas].Enqueue(ctx, spec); err != nil {
				b.Fatalf("enqueue: %v", err)
			}
		}
		enqRate := float64(jobs) / time.Since(enqStart).Seconds()
		// The worst idle poll: a runner no queued job is for walks the
		// whole queue and finds nothing.
		var idle []time.Duration
		for range 50 {
			t0 := time.Now()
			if _, err := sts[0].Claim(ctx, store.ClaimRequest{AgentID: 0, Labels: []string{"gpu", "l40s"}, Lease: time.Hour}); !errors.Is(err, store.ErrNoJob) {
				b.Fatalf("a runner of no pool claimed: %v", err)
			}
			idle = append(idle, time.Since(t0))
		}
		sort.Slice(idle, func(i, j int) bool { return idle[i] < idle[j] })
		var (
			mu        sync.Mutex
			lats      = make([]time.Duration, 0, jobs)
			firstSeen = map[string]int{}
			claimed   int
			wg        sync.WaitGroup
			fails     = make(chan error, agents)
		)
		b.StartTimer()
		start := time.Now()
		for _, r := range runners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					t0 := time.Now()
					j, err := r.st.Claim(ctx, r.req)
					lat := time.Since(t0)
					if errors.Is(err, store.ErrNoJob) {
						return
					}
					if err != nil {
						fails <- err
						return
					}
					mu.Lock()
					lats = append(lats, lat)
					claimed++
					if _, ok := firstSeen[j.Repo]; !ok && j.Priority == fleet.PriorityQuick {
						firstSeen[j.Repo] = claimed
					}
					mu.Unlock()
					if _, err := r.st.Finish(ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
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
		lastFirst := 0
		for _, n := range firstSeen {
			lastFirst = max(lastFirst, n)
		}
		b.ReportMetric(float64(jobs)/elapsed.Seconds(), "claims/s")
		b.ReportMetric(pct(0.50), "p50-claim-ms")
		b.ReportMetric(pct(0.99), "p99-claim-ms")
		b.ReportMetric(pct(1), "max-claim-ms")
		b.ReportMetric(enqRate, "enqueues/s")
		b.ReportMetric(float64(idle[len(idle)/2].Microseconds())/1000, "full-scan-empty-claim-ms")
		b.ReportMetric(float64(lastFirst), "claims-until-every-repo-ran")
		b.StartTimer()
	}
}

func repoName(i int) string { return fmt.Sprintf("org%02d/repo%03d", i%20, i) }
