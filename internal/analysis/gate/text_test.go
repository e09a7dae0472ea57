package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/vocab/figure"
	"strings"
	"testing"
)

// The text report shows the test that decided: the one-sided p after Holm
// and its interval, the evidence and the α spent, and the tier's policy.
func TestWriteText(t *testing.T) {
	t.Parallel()
	levels := map[string]float64{"p99_tpot_ms": 14, "output_throughput": 5000}
	rep := compare(t, runs(levels, 0.005, 0), runs(levels, 0.005, math.Log(1.15), "p99_tpot_ms"), tier(0.05, 3, "tpot_p99", "output_throughput"), Options{})
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	m := metric(t, rep, "tpot_p99")
	for _, want := range []string{"REGRESSION", "Regression: TPOT p99 +15.0% (threshold +5%).", "14.00 ms", "16.10 ms", "+15.0%", "+5%", "−5%", "5,000.0 tok/s", "regression", "~ no change",
		"regression test: p<0.001 after Holm", fmt.Sprintf("[%s, %s] at %s", figure.Change(m.CILow), figure.Change(m.CIHigh), figure.Level(m.Level)), "5 baseline run(s) vs 5 candidate run(s)",
		"look 1 of 4: α 0.179% of the plan's 0.5%", "no drop larger than 5% (lower bound", "policy: a significant change regresses past its threshold", "inconclusive: neutral"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "p=0.008") {
		t.Errorf("text still shows the 5+5 Mann–Whitney p (0.008):\n%s", out)
	}
}
