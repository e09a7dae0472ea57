package report

import (
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
)

func TestCostOf(t *testing.T) {
	t.Parallel()
	price := cost.Price{GPUHourUSD: 4, GPUs: 10}
	metrics := []gate.MetricResult{
		{Metric: "output_throughput", Estimate: -0.09, Verdict: gate.MetricRegression},
		// Secondary metrics never block, so a larger drop there is not priced.
		{Metric: "request_throughput", Estimate: -0.30, Verdict: gate.MetricRegression, Secondary: true},
	}
	tests := []struct {
		name  string
		price cost.Price
		rep   *gate.Report
		want  string // Short(); "" for nil
	}{
		{"regression", price, &gate.Report{Verdict: gate.Regression, Metrics: metrics}, "+$2,888/mo"},
		{"no price", cost.Price{}, &gate.Report{Verdict: gate.Regression, Metrics: metrics}, ""},
		{"a pass costs nothing", price, &gate.Report{Verdict: gate.Pass, Metrics: metrics}, ""},
		{"no report", price, nil, ""},
	}
	for _, tt := range tests {
		got := ""
		if e := CostOf(tt.price, tt.rep); e != nil {
			got = e.Short()
		}
		if got != tt.want {
			t.Errorf("%s: CostOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}
