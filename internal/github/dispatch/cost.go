package dispatch

import (
	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// priceFrom is the repository's declared price as a job's snapshot keeps
// it; nil when the config declares none (no money is shown).
func priceFrom(cfg *config.Config) *cost.Price {
	if !cfg.Cost.Set() {
		return nil
	}
	return &cost.Price{GPUHourUSD: cfg.Cost.GPUHourUSD, GPUs: cfg.Cost.GPUs, MonthlyGPUHours: cfg.Cost.MonthlyGPUHours}
}

// costOf prices a regression at the price the job was queued with, so a
// config change while the job runs does not reprice it.
func costOf(job store.Job, rep *gate.Report) *cost.Estimate {
	s, err := snapshotOf(job)
	if err != nil || s.Price == nil {
		return nil
	}
	return report.CostOf(*s.Price, rep)
}

// costDetail adds a priced regression's monthly figure to its audit
// entry: `perfgate usage` and the dashboard sum it from there.
func costDetail(detail map[string]any, e *cost.Estimate) map[string]any {
	if e != nil && e.Unpriced == "" {
		detail["monthly_usd"] = e.MonthlyUSD
	}
	return detail
}
