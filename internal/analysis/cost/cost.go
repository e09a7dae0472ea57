// Package cost prices a performance regression: what the same traffic costs
// a month in GPU-hours once the engine serves less of it per GPU. It is pure
// arithmetic on the gate's estimates and the repository's declared price; it
// knows nothing of GitHub, the store or the templates.
package cost

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/figure"
)

// HoursPerMonth is an average month: 365 × 24 / 12.
const HoursPerMonth = 730

// Assumption is the model behind every figure, said once wherever one is
// shown.
const Assumption = "Assumes the fleet is sized by throughput: the same traffic on an engine that serves d% less per GPU needs 1/(1−d) as many GPU-hours (a per-token latency rise of x% is read as a throughput drop of x/(1+x))."

// Price is what a repository declared its serving fleet costs: the price
// of a GPU-hour and the fleet's size, as GPUs running all month or as
// GPU-hours a month (GPUs wins when both are set).
type Price struct {
	GPUHourUSD      float64 `json:"gpu_hour_usd"`
	GPUs            int     `json:"gpus,omitempty"`
	MonthlyGPUHours float64 `json:"monthly_gpu_hours,omitempty"`
}

// Set reports whether the price is complete enough to put a figure on.
func (p Price) Set() bool { return p.GPUHourUSD > 0 && p.MonthlyHours() > 0 }

// MonthlyHours is the fleet's GPU-hours a month.
func (p Price) MonthlyHours() float64 {
	if p.GPUs > 0 {
		return float64(p.GPUs) * HoursPerMonth
	}
	return p.MonthlyGPUHours
}

// Monthly is what the fleet costs a month as it is.
func (p Price) Monthly() float64 { return p.GPUHourUSD * p.MonthlyHours() }

// Fleet words the fleet and its price: "10 GPUs ($4.00/GPU-hour)" or
// "7,300 GPU-hours a month ($4.00/GPU-hour)".
func (p Price) Fleet() string {
	rate := "$" + money2(p.GPUHourUSD) + "/GPU-hour"
	if p.GPUs > 0 {
		noun := "GPUs"
		if p.GPUs == 1 {
			noun = "GPU"
		}
		return fmt.Sprintf("%s %s (%s)", figure.Thousands(strconv.Itoa(p.GPUs)), noun, rate)
	}
	return fmt.Sprintf("%s GPU-hours a month (%s)", figure.Thousands(strconv.FormatFloat(math.Round(p.MonthlyGPUHours), 'f', 0, 64)), rate)
}

// Change is one metric's estimated change as the gate measured it.
type Change struct {
	// Metric is the config name ("output_throughput", "tpot_median"); a
	// nightly matrix cell's label may precede it ("c=16 tpot_median").
	Metric string
	// Estimate is the relative change by value: −0.09 is 9% lower.
	Estimate float64
	// Regressed is the gate's verdict on the metric.
	Regressed bool
}

// Estimate is what one verdict costs a month at a price.
type Estimate struct {
	Price Price `json:"price"`
	// Metric is the change the figure rests on, Change its estimate.
	Metric string  `json:"metric,omitempty"`
	Change float64 `json:"change,omitempty"`
	// Factor is how many times the GPU-hours the same traffic needs.
	Factor float64 `json:"factor,omitempty"`
	// MonthlyUSD is the added cost a month; 0 with Unpriced set when no
	// regressed metric measures capacity.
	MonthlyUSD float64 `json:"monthly_usd"`
	Unpriced   string  `json:"unpriced,omitempty"`
}

// Of prices a verdict's regressed metrics. A regressed throughput
// decides first (it measures capacity directly), then a per-token latency
// (TPOT, ITL: decode capacity); of several, the most expensive. A
// regression only in time to first token, end-to-end latency, errors or
// memory has no GPU-hour price: Unpriced says so.
func Of(p Price, changes []Change) Estimate {
	e := Estimate{Price: p}
	for _, kind := range []func(string) bool{isThroughput, isTokenLatency} {
		for _, c := range changes {
			name := metricName(c.Metric)
			if !c.Regressed || !kind(name) {
				continue
			}
			f := factor(name, c.Estimate)
			if f > e.Factor {
				e.Metric, e.Change, e.Factor = c.Metric, c.Estimate, f
			}
		}
		if e.Factor > 0 {
			break
		}
	}
	if e.Factor == 0 {
		e.Unpriced = "the regressed metrics (time to first token, end-to-end latency, errors or memory) do not measure how much traffic a GPU serves"
		return e
	}
	e.MonthlyUSD = (e.Factor - 1) * p.Monthly()
	return e
}

// factor is how many times the GPU-hours the same traffic needs after a
// change of the metric: 1/(1+c) for a throughput (c < 0), 1+c for a
// per-token latency (c > 0); 1 for a change the other way.
func factor(name string, c float64) float64 {
	if isThroughput(name) {
		if c >= 0 || c <= -1 {
			return 1
		}
		return 1 / (1 + c)
	}
	return math.Max(1, 1+c)
}

func isThroughput(name string) bool {
	switch name {
	case "output_throughput", "total_token_throughput", "request_throughput":
		return true
	}
	return false
}

func isTokenLatency(name string) bool {
	return strings.HasPrefix(name, "tpot_") || strings.HasPrefix(name, "itl_")
}

// metricName drops a nightly matrix cell's label.
func metricName(metric string) string {
	if i := strings.LastIndexByte(metric, ' '); i >= 0 {
		return metric[i+1:]
	}
	return metric
}
