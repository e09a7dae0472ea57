package dispatch

import (
	"math"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// A regression on a repository that declares its GPU price states what it
// costs a month on the check run and in the warning, and the audit entry
// carries the figure `perfgate usage` sums; without a price nothing speaks
// of money.
func TestRegressionStatesItsCost(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		priced     bool
	}{
		{"priced", "cost:\n  gpu_hour_usd: 4\n  gpus: 10\n", true},
		{"no price", "# perfgate defaults\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte(tc.yaml))
			l.baseline(1.3) // the candidate serves 1/1.3 of the baseline's throughput
			id := l.request(headSHA, false)
			l.runAll()
			c := l.check(id)
			if c.Conclusion != "neutral" {
				t.Fatalf("conclusion %q, want a neutral warning", c.Conclusion)
			}
			doc := l.doc(headSHA)
			comments := l.gh.Comments()
			if len(comments) != 1 {
				t.Fatalf("%d comments, want the warning", len(comments))
			}
			rows, err := l.st.Usage(l.ctx, store.UsageFilter{Repo: testRepo})
			if err != nil || len(rows) != 1 {
				t.Fatalf("usage %+v, %v", rows, err)
			}
			if !tc.priced {
				if doc.Cost != nil || strings.Contains(c.Summary, "Cost") || strings.Contains(comments[0].Body, "Cost") || rows[0].RegressionUSDMonth != 0 {
					t.Errorf("no price declared, yet money shows: doc %+v usage %+v\n%s", doc.Cost, rows[0], c.Summary)
				}
				return
			}
			e := doc.Cost
			// The throughput fell to about 1/1.3: about 30% more GPU-hours
			// of 7,300 at $4.
			if e == nil || e.Metric != "output_throughput" || math.Abs(e.Factor-1.3) > 0.05 || math.Abs(e.MonthlyUSD-0.3*29200) > 0.05*29200 {
				t.Fatalf("cost %+v; want output_throughput at about 1.3× the GPU-hours", e)
			}
			line := "**Cost:** output throughput " // then the change and the figure
			if !strings.Contains(c.Summary, line) || !strings.Contains(c.Summary, e.Line()) || !strings.Contains(comments[0].Body, e.Line()) {
				t.Errorf("the check and the warning must state %q:\n%s\n---\n%s", e.Line(), c.Summary, comments[0].Body)
			}
			if rows[0].Regressions != 1 || math.Abs(rows[0].RegressionUSDMonth-e.MonthlyUSD) > 1e-6 {
				t.Errorf("usage %+v; want 1 regression costing %.2f a month", rows[0], e.MonthlyUSD)
			}
		})
	}
}
