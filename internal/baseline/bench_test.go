package baseline

import (
	"fmt"
	"testing"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/gate"
)

// BenchmarkMovesUpRule measures the "only moves up" rule on synthetic
// 5-run sets (merge tier, no noise history): how often a re-run of
// unchanged code is refused, and how often a real 4% tpot_p99 loss — inside
// the 5% PR threshold — is caught. Run with
//
//	go test -run '^$' -bench MovesUpRule -benchtime 1000x ./internal/baseline/
func BenchmarkMovesUpRule(b *testing.B) {
	tier, err := config.Default().Tier("merge")
	if err != nil {
		b.Fatal(err)
	}
	for _, cv := range []float64{0.02, 0.05} {
		b.Run(fmt.Sprintf("cv=%g", cv), func(b *testing.B) {
			falseRefusals, caught := 0, 0
			for i := 0; i < b.N; i++ {
				base := makeRuns(5, uint64(2*i+1), cv, nil)
				same, err := gate.Compare(base, makeRuns(5, uint64(2*i+2), cv, nil), tier, gate.Options{Looks: 1})
				if err != nil {
					b.Fatal(err)
				}
				if len(worseMetrics(same)) > 0 {
					falseRefusals++
				}
				lower, err := gate.Compare(base, makeRuns(5, uint64(2*i+2), cv, map[string]float64{"p99_tpot_ms": 1.04}), tier, gate.Options{Looks: 1})
				if err != nil {
					b.Fatal(err)
				}
				if len(worseMetrics(lower)) > 0 {
					caught++
				}
			}
			b.ReportMetric(100*float64(falseRefusals)/float64(b.N), "%false-refusal")
			b.ReportMetric(100*float64(caught)/float64(b.N), "%caught-4%-loss")
		})
	}
}
