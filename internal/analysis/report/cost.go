package report

import (
	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
)

// CostOf prices a regression verdict's gated metrics at the repository's
// declared price; nil when no price is declared or the verdict is not a
// regression. Secondary metrics never block, so they are never priced.
func CostOf(p cost.Price, rep *gate.Report) *cost.Estimate {
	if rep == nil || rep.Verdict != gate.Regression || !p.Set() {
		return nil
	}
	var changes []cost.Change
	for _, m := range rep.Metrics {
		if m.Secondary {
			continue
		}
		changes = append(changes, cost.Change{Metric: m.Metric, Estimate: m.Estimate, Regressed: m.Verdict == gate.MetricRegression})
	}
	e := cost.Of(p, changes)
	return &e
}
