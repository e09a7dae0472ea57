package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// BenchmarkAcceptUnderWrites measures AcceptDelivery — the one insert a
// webhook's answer waits for — on SQLite while 8 goroutines keep the
// writer busy with outbox writes, as the workers do under load: p50 and
// p99 of 200 inserts, one every 10 ms.
//
//	go test -run XXX -bench AcceptUnderWrites -benchtime 1x ./internal/store
func BenchmarkAcceptUnderWrites(b *testing.B) {
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := store.Open(ctx, filepath.Join(b.TempDir(), "perfgate.db"))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := json.Marshal(store.CommentBody{Number: 1, Body: "x"})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					_, _ = st.PutEffect(ctx, store.Effect{Key: fmt.Sprintf("w%d-%d", w, i), Kind: store.EffectComment, InstallationID: 1, Repo: "acme/llm", Body: body})
					es, _ := st.ClaimEffects(ctx, 4, time.Minute)
					for _, e := range es {
						_ = st.CompleteEffect(ctx, e.ID, e.LeaseID, e.Version)
					}
				}
			}()
		}
		payload := make([]byte, 8<<10)
		var lats []time.Duration
		for i := range 200 {
			time.Sleep(10 * time.Millisecond)
			t0 := time.Now()
			if _, err := st.AcceptDelivery(ctx, fmt.Sprintf("d-%d", i), "pull_request", payload, store.DeliveryOrder{Subject: fmt.Sprintf("acme/llm#%d", i%20)}); err != nil {
				b.Fatal(err)
			}
			lats = append(lats, time.Since(t0))
		}
		cancel()
		wg.Wait()
		st.Close()
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
		b.ReportMetric(ms(lats[len(lats)*99/100]), "p99-ms")
	}
}
