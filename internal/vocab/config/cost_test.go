package config

import (
	"strings"
	"testing"
)

func TestCostSection(t *testing.T) {
	t.Parallel()
	if c := Default(); c.Cost.Set() {
		t.Fatalf("default cost %+v: want unset (no money line)", c.Cost)
	}
	valid := []struct {
		yaml string
		want Cost
	}{
		{"cost:\n  gpu_hour_usd: 4.10\n  gpus: 10\n", Cost{GPUHourUSD: 4.10, GPUs: 10}},
		{"cost:\n  gpu_hour_usd: 3\n  monthly_gpu_hours: 7300\n", Cost{GPUHourUSD: 3, MonthlyGPUHours: 7300}},
	}
	for _, tc := range valid {
		c, err := Parse(DefaultPath, []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Cost != tc.want || !c.Cost.Set() {
			t.Errorf("%q: cost %+v, want %+v", tc.yaml, c.Cost, tc.want)
		}
	}
	invalid := []struct{ yaml, want string }{
		{"cost:\n  gpu_hour_usd: 4000\n  gpus: 10\n", "cost.gpu_hour_usd: $4000 per GPU-hour"},
		{"cost:\n  gpu_hour_usd: -1\n  gpus: 10\n", "no price of a GPU-hour"},
		{"cost:\n  gpu_hour_usd: 4\n  gpus: 0\n", "cost.gpus: 0 GPUs"},
		{"cost:\n  gpu_hour_usd: 4\n  monthly_gpu_hours: -5\n", "cost.monthly_gpu_hours: -5 GPU-hours a month"},
		{"cost:\n  gpus: 10\n", "no price of a GPU-hour"},
		{"cost:\n  gpu_hour_usd: 4\n  gpu: 10\n", `unknown key "gpu" (did you mean "gpus"?)`},
	}
	for _, tc := range invalid {
		_, err := Parse(DefaultPath, []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
}
