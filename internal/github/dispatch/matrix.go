package dispatch

import (
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// matrixPlans expands a tier's matrix into one plan per cell, each
// labelled; a tier without a matrix is its one plan with no label.
func matrixPlans(plan agentapi.Plan, t config.Tier) ([]agentapi.Plan, []string) {
	if len(t.Matrix) == 0 {
		return []agentapi.Plan{plan}, []string{""}
	}
	plans := make([]agentapi.Plan, 0, len(t.Matrix))
	labels := make([]string, 0, len(t.Matrix))
	for _, m := range t.Matrix {
		p := plan
		var parts []string
		if m.MaxConcurrency != 0 {
			p.Workload.MaxConcurrency = m.MaxConcurrency
			parts = append(parts, "c="+strconv.Itoa(m.MaxConcurrency))
		}
		if m.RequestRate != 0 {
			p.Workload.RequestRate = m.RequestRate
			parts = append(parts, "rate="+m.RequestRate.String())
		}
		if m.InputLen != 0 {
			p.Workload.InputLen = m.InputLen
			parts = append(parts, "in="+strconv.Itoa(m.InputLen))
		}
		if m.OutputLen != 0 {
			p.Workload.OutputLen = m.OutputLen
			parts = append(parts, "out="+strconv.Itoa(m.OutputLen))
		}
		if len(parts) == 0 {
			parts = []string{"base"}
		}
		plans = append(plans, p)
		labels = append(labels, strings.Join(parts, ","))
	}
	return plans, labels
}

// isMatrix reports whether the jobs measure labelled matrix cells, which
// are judged and promoted per cell (even a matrix of one).
func isMatrix(cells map[string][]int64) bool {
	if len(cells) > 1 {
		return true
	}
	for label := range cells {
		return label != ""
	}
	return false
}

// cellKey is the baseline and trend key of a matrix cell: the tier, or
// "<tier>/<cell>".
func cellKey(tier, cell string) string { return judge.CellKey(tier, cell) }
