package baseline

import (
	"fmt"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// BenchmarkMovesUpRule measures the "only moves up" rule on synthetic
// 5-run sets (merge tier, four earlier baselines, 2% session-to-session
// shifts): how often a re-run of unchanged code is refused, and how often
// a real 4% tpot_p90 loss — inside the 5% PR threshold — and a 10% one are
// caught. Run with
//
//	go test -run '^$' -bench MovesUpRule -benchtime 1000x ./internal/github/baseline/
func BenchmarkMovesUpRule(b *testing.B) {
	tier, err := config.Default().Tier("merge")
	if err != nil {
		b.Fatal(err)
	}
	for _, cv := range []float64{0.02, 0.05} {
		b.Run(fmt.Sprintf("cv=%g", cv), func(b *testing.B) {
			falseRefusals, caught4, caught10 := 0, 0, 0
			refused := func(scale map[string]float64, i int, sessions []gate.Session) bool {
				rep, err := gate.CompareRecent(makeSession(5, uint64(1000*i+999), cv, 0.02, scale), tier,
					gate.Options{Looks: gate.SingleLook(), History: gate.History{Sessions: sessions}})
				if err != nil {
					b.Fatal(err)
				}
				return len(worseMetrics(rep)) > 0
			}
			for i := 0; i < b.N; i++ {
				var sessions []gate.Session
				for h := 0; h < 4; h++ {
					sessions = append(sessions, gate.Session{Label: fmt.Sprint(h), Runs: makeSession(5, uint64(1000*i+h), cv, 0.02, nil)})
				}
				if refused(nil, i, sessions) {
					falseRefusals++
				}
				if refused(map[string]float64{"p90_tpot_ms": 1.04}, i, sessions) {
					caught4++
				}
				if refused(map[string]float64{"p90_tpot_ms": 1.10}, i, sessions) {
					caught10++
				}
			}
			b.ReportMetric(100*float64(falseRefusals)/float64(b.N), "%false-refusal")
			b.ReportMetric(100*float64(caught4)/float64(b.N), "%caught-4%-loss")
			b.ReportMetric(100*float64(caught10)/float64(b.N), "%caught-10%-loss")
		})
	}
}
