package cost

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// Line words an estimate for the check run: "output throughput −9.0%:
// 1.10× the GPU-hours for the same traffic, +$2,888 a month at 10 GPUs
// ($4.00/GPU-hour)".
func (e Estimate) Line() string {
	if e.Unpriced != "" {
		return "not priced: " + e.Unpriced + "."
	}
	return fmt.Sprintf("%s %s: %.2f× the GPU-hours for the same traffic, **%s a month** at %s.",
		gate.DisplayName(e.Metric), figure.Change(e.Change), e.Factor, USD(e.MonthlyUSD), e.Price.Fleet())
}

// Short words an estimate in a few characters for a table cell: "+$2,888/mo".
func (e Estimate) Short() string {
	if e.Unpriced != "" {
		return "not priced"
	}
	return USD(e.MonthlyUSD) + "/mo"
}

// USD prints a monthly figure rounded to the dollar with its sign:
// "+$2,888", "$0".
func USD(v float64) string {
	r := math.Round(v)
	switch {
	case r > 0:
		return "+$" + figure.Thousands(strconv.FormatFloat(r, 'f', 0, 64))
	case r < 0:
		return "−$" + figure.Thousands(strconv.FormatFloat(-r, 'f', 0, 64))
	}
	return "$0"
}

// Sum adds estimates' monthly figures, counting the unpriced ones apart.
func Sum(es []Estimate) (usd float64, priced, unpriced int) {
	for _, e := range es {
		if e.Unpriced != "" {
			unpriced++
			continue
		}
		usd += e.MonthlyUSD
		priced++
	}
	return usd, priced, unpriced
}

func money2(v float64) string { return figure.Thousands(strconv.FormatFloat(v, 'f', 2, 64)) }

// Plain is Line without markdown, for HTML and terminals.
func (e Estimate) Plain() string { return strings.ReplaceAll(e.Line(), "**", "") }
