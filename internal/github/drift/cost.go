package drift

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/cost"
)

// eventCost prices an event's step at the price its first bad night's job
// was queued with (the job snapshot's "price", which internal/github/dispatch
// writes from the repository's `cost:`); nil when the job carries none.
// Of the event's change points, the costliest capacity metric decides
// (cost.Of): a step seen in several matrix cells is priced at the cell
// where it costs most.
func (p *Pass) eventCost(ctx context.Context, e *event) *cost.Estimate {
	lead := e.leader()
	if lead.BadJobID == 0 {
		return nil
	}
	job, err := p.o.Store.GetJob(ctx, lead.BadJobID)
	if err != nil {
		p.o.Log.Warn().Err(err).Int64("job", lead.BadJobID).Msg("change-point cost: job unreadable; the event is not priced")
		return nil
	}
	var snap struct {
		Price *cost.Price `json:"price"`
	}
	if json.Unmarshal(job.Config, &snap) != nil || snap.Price == nil || !snap.Price.Set() {
		return nil
	}
	changes := make([]cost.Change, 0, len(e.members))
	for _, m := range e.members {
		changes = append(changes, cost.Change{Metric: m.Key + " " + m.Metric, Estimate: m.Change, Regressed: m.Regression})
	}
	est := cost.Of(*snap.Price, changes)
	return &est
}

// costLine is the and the Slack message's word on money: the
// event's figure and, for Slack, what the repository's open regressions on
// the default branch cost a month together.
func costLine(e *event) string {
	if e.cost == nil {
		return ""
	}
	if e.cost.Unpriced != "" {
		return "**Cost:** " + e.cost.Line()
	}
	return "**Cost:** if it stays, " + e.cost.Line() + " " + cost.Assumption
}

// openTotal words what the open events of a repository cost together.
func openTotal(events []*event) string {
	var es []cost.Estimate
	for _, e := range events {
		if e.cost != nil {
			es = append(es, *e.cost)
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
