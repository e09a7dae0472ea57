package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

// Two years of nightly results: 730 nights × 10 matrix cells × 20 metrics.
const (
	benchRepo    = "acme/large"
	benchNights  = 730
	benchCells   = 10
	benchMetrics = 20
)

var benchMetricNames = []string{
	"tpot_p99", "ttft_p99", "itl_p99", "e2el_p99", "tpot_median", "ttft_median", "itl_median", "e2el_median",
	"tpot_p90", "ttft_p90", "itl_p90", "e2el_p90", "tpot_mean", "ttft_mean", "output_throughput", "request_throughput",
	"total_token_throughput", "error_rate", "gpu_mem_used", "gpu_power",
}

var (
	largeOnce sync.Map // dsn kind → *largeStore
)

type largeStore struct {
	once sync.Once
	st   store.Store
	err  error
}

// seedLarge writes the two-year history once per backend and process.
func seedLarge(b *testing.B, kind string) store.Store {
	v, _ := largeOnce.LoadOrStore(kind, &largeStore{})
	ls := v.(*largeStore)
	ls.once.Do(func() {
		ctx := context.Background()
		dsn := filepath.Join(b.TempDir(), "large.db")
		if kind == "postgres" {
			dsn = storetest.PostgresDSN(b)
		}
		st, err := store.Open(ctx, dsn)
		if err != nil {
			ls.err = err
			return
		}
		ls.st = st
		start := time.Now()
		rng := rand.New(rand.NewPCG(1, 2))
		end := time.Date(2025, 6, 30, 0, 0, 0, 0, time.UTC)
		for d := 0; d < benchNights; d++ {
			day := end.AddDate(0, 0, d-benchNights+1)
			sha := history.Commit(benchRepo, d)
			var ids []int64
			var rows []gate.MetricResult
			for c := 0; c < benchCells; c++ {
				cell := fmt.Sprintf("c=%d", 1<<c)
				j, err := st.Enqueue(ctx, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: benchRepo, HeadSHA: sha,
					Config: []byte(fmt.Sprintf(`{"cell":%q}`, cell)), Labels: []string{"bench-never-claimed"}})
				if err != nil {
					ls.err = err
					return
				}
				ids = append(ids, j.ID)
				for m, name := range benchMetricNames {
					v := float64(10+m) * (1 + 0.02*rng.NormFloat64())
					if err := st.PutTrend(ctx, store.TrendPoint{Repo: benchRepo, Key: "nightly/" + cell, Metric: name, Date: day, Value: v, JobID: j.ID}); err != nil {
						ls.err = err
						return
					}
					rows = append(rows, gate.MetricResult{Metric: cell + " " + name, Baseline: 10, Candidate: v, Verdict: gate.MetricSame})
				}
			}
			state := store.CheckPassed
			if d%20 == 0 { // a warned night now and then: the series page parses those verdicts
				state = store.CheckWarned
				rows[0].Verdict = gate.MetricRegression
			}
			doc, _ := json.Marshal(map[string]any{"report": gate.Report{Tier: "nightly", Verdict: gate.Pass, Metrics: rows}})
			if _, err := st.PutCheckRun(ctx, store.CheckRun{Repo: benchRepo, HeadSHA: sha, Tier: "nightly", JobIDs: ids, State: state, Verdict: doc}); err != nil {
				ls.err = err
				return
			}
		}
		b.Logf("%s: seeded %d nights × %d cells × %d metrics = %d points in %s", kind, benchNights, benchCells, benchMetrics,
			benchNights*benchCells*benchMetrics, time.Since(start).Round(time.Second))
	})
	if ls.err != nil {
		b.Fatal(ls.err)
	}
	return ls.st
}

// BenchmarkDashboard measures the server's time for the series page and
// the API on two years of nightly results (730 × 20 metrics × 10 cells):
//
//	go test -run XXX -bench Dashboard -benchtime 20x ./internal/github/web
func BenchmarkDashboard(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			st := seedLarge(b, kind)
			h, err := web.New(web.Options{Store: st, Visibility: web.StaticVisibility{benchRepo: true}, Signer: web.NewSigner([]byte("k"), time.Hour, nil), Log: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range []struct{ name, path string }{
				{"series page", "/r/" + benchRepo + "/series?key=nightly/c=16&metric=tpot_p99"},
				{"weekly page", "/r/" + benchRepo + "/series?key=nightly/c=16&metric=tpot_p99&view=weekly"},
				{"series API JSON", "/api/data/repos/" + benchRepo + "/series/points?key=nightly/c=16&metric=tpot_p99"},
				{"series API CSV", "/api/data/repos/" + benchRepo + "/series/points?key=nightly/c=16&metric=tpot_p99&format=csv"},
				{"repository page", "/r/" + benchRepo},
				{"series list API", "/api/data/repos/" + benchRepo + "/series"},
			} {
				b.Run(p.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
						if rec.Code != http.StatusOK {
							b.Fatalf("%s: %d %.300s", p.path, rec.Code, rec.Body.String())
						}
					}
				})
			}
		})
	}
}
