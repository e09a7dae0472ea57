package agentserver

import (
	"encoding/json"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// BenchmarkCheckNumbers reads every number of the 1.7 M-request result of
// BenchmarkLargeResult (41 MiB): what bounding them costs an upload.
func BenchmarkCheckNumbers(b *testing.B) {
	const n = 1_700_000
	r := result.Result{Completed: n, Duration: 600, OutputThroughput: 1000, Metrics: map[string]float64{"median_ttft_ms": 150}}
	r.TTFTs, r.InputLens, r.OutputLens, r.ITLs, r.Errors = make([]float64, n), make([]int, n), make([]int, n), make([][]float64, n), make([]string, n)
	for i := range n {
		r.TTFTs[i], r.InputLens[i], r.OutputLens[i], r.ITLs[i] = 0.1+float64(i%7)/100, 128, 2, []float64{0.01}
	}
	raw, _ := json.Marshal(r)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkNumbers(raw); err != nil {
			b.Fatal(err)
		}
	}
}
