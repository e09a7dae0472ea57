package drift

import (
	"context"
	"encoding/json"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/drift"
)

// price is the price an event's leader's first bad night was queued with
// (the job snapshot's "price", which internal/github/dispatch writes from
// the repository's `cost:`); false when the job carries none, and the
// event is not priced (drift.Event.Price prices it).
func (p *Pass) price(ctx context.Context, lead drift.ChangePoint) (cost.Price, bool) {
	if lead.BadJobID == 0 {
		return cost.Price{}, false
	}
	job, err := p.o.Store.GetJob(ctx, lead.BadJobID)
	if err != nil {
		p.o.Log.Warn().Err(err).Int64("job", lead.BadJobID).Msg("change-point cost: job unreadable; the event is not priced")
		return cost.Price{}, false
	}
	var snap struct {
		Price *cost.Price `json:"price"`
	}
	if json.Unmarshal(job.Config, &snap) != nil || snap.Price == nil || !snap.Price.Set() {
		return cost.Price{}, false
	}
	return *snap.Price, true
}
