package main

import (
	"fmt"
	"io"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// writeCost prints what a regression costs a month at the config's
// declared price (cost: in perfgate.yml), as the check run states it;
// nothing without a price or a regression.
func writeCost(w io.Writer, cfg *config.Config, rep *gate.Report) error {
	if !cfg.Cost.Set() {
		return nil
	}
	e := report.CostOf(cost.Price{GPUHourUSD: cfg.Cost.GPUHourUSD, GPUs: cfg.Cost.GPUs, MonthlyGPUHours: cfg.Cost.MonthlyGPUHours}, rep)
	if e == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nCost: %s\n", e.Plain())
	if err == nil && e.Unpriced == "" {
		_, err = fmt.Fprintln(w, cost.Assumption)
	}
	return err
}
