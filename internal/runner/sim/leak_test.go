package sim

import (
	"io"
	"net/http"
	"testing"
)

// The planted leak keeps its share of every answered request, and the
// gauge and the process's own RSS metric are served beside vLLM's.
func TestLeakGrowsWithRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		mbPer1k  float64
		requests int
		want     int64
	}{
		{"no leak", 0, 20, 0},
		{"100 MB per 1k", 100, 20, 20 * int64(100*(1<<20)/1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := zeroConfig()
			cfg.LeakMBPer1kRequests = tc.mbPer1k
			_, ts := startEngine(t, cfg)
			ctx := testCtx(t)
			for range tc.requests {
				resp := post(t, ctx, ts.URL+"/v1/completions", `{"model":"perfgate-sim","prompt":"hi","max_tokens":2}`)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			metrics := scrape(t, ts.URL)
			if got := value(t, metrics, "perfgate_sim_leaked_bytes"); int64(got) != tc.want {
				t.Errorf("leaked %v bytes, want %d", got, tc.want)
			}
			if rss := value(t, metrics, "process_resident_memory_bytes"); rss <= 0 {
				t.Errorf("process_resident_memory_bytes %v: want the process's RSS", rss)
			}
		})
	}
}
