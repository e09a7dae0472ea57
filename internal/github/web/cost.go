package web

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/store"
)

// OpenCost is what a repository's open pull-request regressions (warned
// or escalated checks) would cost a month at its declared price.
type OpenCost struct {
	MonthlyUSD float64 `json:"monthly_usd"`
	// Priced counts the regressions with a figure; Unpriced those whose
	// regressed metrics have no GPU-hour price (TTFT only, errors).
	Priced   int `json:"priced"`
	Unpriced int `json:"unpriced"`
}

// USD words the sum: "+$2,888".
func (o OpenCost) USD() string { return cost.USD(o.MonthlyUSD) }

// verdictCost reads the price a stored verdict document carries under
// "cost" (internal/github/dispatch writes it for a priced regression); nil when
// it has none or cannot be read.
func verdictCost(raw json.RawMessage) *cost.Estimate {
	if len(raw) == 0 {
		return nil
	}
	var doc struct {
		Cost *cost.Estimate `json:"cost"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return nil
	}
	return doc.Cost
}

func (h *Handler) openCost(ctx context.Context, repo string) (OpenCost, error) {
	crs, err := h.st.RepoCheckRuns(ctx, store.CheckRunFilter{Repo: repo, States: []string{store.CheckWarned, store.CheckEscalated}})
	if err != nil {
		return OpenCost{}, fmt.Errorf("open regressions of %s: %w", repo, err)
	}
	var es []cost.Estimate
	for _, cr := range crs {
		if e := verdictCost(cr.Verdict); e != nil {
			es = append(es, *e)
		}
	}
	var o OpenCost
	o.MonthlyUSD, o.Priced, o.Unpriced = cost.Sum(es)
	return o, nil
}
