package cost

import (
	"math"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	ten := Price{GPUHourUSD: 4, GPUs: 10}
	tests := []struct {
		name     string
		price    Price
		changes  []Change
		metric   string
		factor   float64
		usd      float64
		unpriced bool
		line     string
	}{
		{"throughput drop of 9% at 10 GPUs", ten,
			[]Change{{"output_throughput", -0.09, true}, {"ttft_p90", 0.02, false}},
			"output_throughput", 1 / 0.91, (1/0.91 - 1) * 29200, false,
			"output throughput −9.0%: 1.10× the GPU-hours for the same traffic, **+$2,888 a month** at 10 GPUs ($4.00/GPU-hour)."},
		{"throughput outranks a larger latency rise", ten,
			[]Change{{"tpot_median", 0.20, true}, {"request_throughput", -0.05, true}},
			"request_throughput", 1 / 0.95, (1/0.95 - 1) * 29200, false, ""},
		{"the costlier of two throughputs", ten,
			[]Change{{"request_throughput", -0.05, true}, {"output_throughput", -0.10, true}},
			"output_throughput", 1 / 0.9, (1/0.9 - 1) * 29200, false, ""},
		{"a throughput that did not regress is not priced", ten,
			[]Change{{"output_throughput", -0.30, false}, {"tpot_median", 0.10, true}},
			"tpot_median", 1.10, 0.10 * 29200, false,
			"TPOT median +10.0%: 1.10× the GPU-hours for the same traffic, **+$2,920 a month** at 10 GPUs ($4.00/GPU-hour)."},
		{"monthly GPU-hours instead of GPUs", Price{GPUHourUSD: 2.5, MonthlyGPUHours: 7300},
			[]Change{{"c=16 itl_p99", 0.05, true}},
			"c=16 itl_p99", 1.05, 0.05 * 7300 * 2.5, false,
			"c=16 · ITL p99 +5.0%: 1.05× the GPU-hours for the same traffic, **+$913 a month** at 7,300 GPU-hours a month ($2.50/GPU-hour)."},
		{"TTFT alone has no GPU-hour price", ten,
			[]Change{{"ttft_p90", 0.30, true}, {"error_rate", 0.02, true}},
			"", 0, 0, true,
			"not priced: the regressed metrics (time to first token, end-to-end latency, errors or memory) do not measure how much traffic a GPU serves."},
		{"one GPU", Price{GPUHourUSD: 1, GPUs: 1},
			[]Change{{"total_token_throughput", -0.5, true}},
			"total_token_throughput", 2, 730, false,
			"total token throughput −50.0%: 2.00× the GPU-hours for the same traffic, **+$730 a month** at 1 GPU ($1.00/GPU-hour)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := Of(tt.price, tt.changes)
			if e.Metric != tt.metric || math.Abs(e.Factor-tt.factor) > 1e-9 || math.Abs(e.MonthlyUSD-tt.usd) > 1e-6 || (e.Unpriced != "") != tt.unpriced {
				t.Fatalf("Of = %+v; want metric %q factor %.4f usd %.2f unpriced %v", e, tt.metric, tt.factor, tt.usd, tt.unpriced)
			}
			if tt.line != "" && e.Line() != tt.line {
				t.Errorf("Line\n got %s\nwant %s", e.Line(), tt.line)
			}
		})
	}
}

func TestPrice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p     Price
		set   bool
		hours float64
		fleet string
	}{
		{Price{GPUHourUSD: 4, GPUs: 10}, true, 7300, "10 GPUs ($4.00/GPU-hour)"},
		{Price{GPUHourUSD: 4, GPUs: 10, MonthlyGPUHours: 1}, true, 7300, "10 GPUs ($4.00/GPU-hour)"},
		{Price{GPUHourUSD: 3.5, MonthlyGPUHours: 1234.4}, true, 1234.4, "1,234 GPU-hours a month ($3.50/GPU-hour)"},
		{Price{GPUs: 10}, false, 7300, "10 GPUs ($0.00/GPU-hour)"},
		{Price{GPUHourUSD: 4}, false, 0, "0 GPU-hours a month ($4.00/GPU-hour)"},
	}
	for _, tt := range tests {
		if tt.p.Set() != tt.set || tt.p.MonthlyHours() != tt.hours || tt.p.Fleet() != tt.fleet {
			t.Errorf("%+v: Set %v MonthlyHours %g Fleet %q; want %v %g %q", tt.p, tt.p.Set(), tt.p.MonthlyHours(), tt.p.Fleet(), tt.set, tt.hours, tt.fleet)
		}
	}
}

func TestUSDAndSum(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{2887.9: "+$2,888", 0.4: "$0", -1234567: "−$1,234,567", 999.5: "+$1,000"} {
		if got := USD(v); got != want {
			t.Errorf("USD(%g) = %q, want %q", v, got, want)
		}
	}
	usd, priced, unpriced := Sum([]Estimate{{MonthlyUSD: 100}, {MonthlyUSD: 50.5}, {Unpriced: "ttft"}})
	if usd != 150.5 || priced != 2 || unpriced != 1 {
		t.Errorf("Sum = %g, %d, %d; want 150.5, 2, 1", usd, priced, unpriced)
	}
}
