package drift

import (
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/cost"
)

// Price prices the event's step at p, the price its first bad night's job
// was queued with. Of the event's change points, the costliest capacity
// metric decides (cost.Of): a step seen in several matrix cells is priced
// at the cell where it costs most.
func (e *Event) Price(p cost.Price) {
	changes := make([]cost.Change, 0, len(e.Members))
	for _, m := range e.Members {
		changes = append(changes, cost.Change{Metric: m.Key + " " + m.Metric, Estimate: m.Change, Regressed: m.Regression})
	}
	est := cost.Of(p, changes)
	e.Cost = &est
}

// costLine is the word on money: the event's figure, or nothing
// when it is not priced.
func costLine(e *Event) string {
	if e.Cost == nil {
		return ""
	}
	if e.Cost.Unpriced != "" {
		return "**Cost:** " + e.Cost.Line()
	}
	return "**Cost:** if it stays, " + e.Cost.Line() + " " + cost.Assumption
}

// OpenTotal words what the open events of a repository cost together, for
// the Slack message: "Open regressions on the default branch: 2 priced,
// +$3,100 a month in all."; "" when none is priced.
func OpenTotal(events []*Event) string {
	var es []cost.Estimate
	for _, e := range events {
		if e.Cost != nil {
			es = append(es, *e.Cost)
		}
	}
	usd, priced, unpriced := cost.Sum(es)
	if priced+unpriced == 0 {
		return ""
	}
	s := fmt.Sprintf("Open regressions on the default branch: %d priced, %s a month in all", priced, cost.USD(usd))
	if unpriced > 0 {
		s += fmt.Sprintf(" (%d not priced)", unpriced)
	}
	return s + "."
}
