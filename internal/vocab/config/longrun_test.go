package config

import (
	"strings"
	"testing"
	"time"
)

func TestLongRunSections(t *testing.T) {
	t.Parallel()
	if c := Default(); c.Capacity.On || c.Soak.On {
		t.Fatalf("default config has a capacity or soak tier: %+v %+v", c.Capacity, c.Soak)
	}
	c, err := Parse(DefaultPath, []byte(`capacity:
  rates: [2, 4, 8, 16]
  slo: {ttft_ms: 250}
  step: 4s
  sweeps: 1
  threshold: 15%
  nightly: true
soak:
  duration: 90m
  window: 1m
  rate: 20
  thresholds: {memory_noise_mb: 48}
`))
	if err != nil {
		t.Fatal(err)
	}
	cp, sk := c.Capacity, c.Soak
	if !cp.On || !cp.Nightly || len(cp.Rates) != 4 || cp.SLO.TTFTms != 250 || cp.Step.D() != 4*time.Second || cp.Sweeps != 1 || cp.Threshold != 0.15 || cp.Arrivals != "constant" || cp.MinPrompts != 40 {
		t.Errorf("capacity %+v", cp)
	}
	// Thresholds the file did not write keep their defaults.
	if !sk.On || sk.Nightly || sk.Duration.D() != 90*time.Minute || sk.Rate != 20 || sk.Thresholds.MemoryNoiseMB != 48 || sk.Thresholds.MaxRSSGrowthMBPerHour != 64 || sk.Thresholds.MinSamples != 8 {
		t.Errorf("soak %+v", sk)
	}

	invalid := []struct{ yaml, want string }{
		{"capacity:\n  rates: [4, 2]\n  slo: {ttft_ms: 250}\n", "capacity rates must rise: 2 follows 4"},
		{"capacity:\n  sweeps: 2\n", "capacity.slo: no SLO"},
		{"capacity:\n  slo: {ttft: 250}\n", `capacity.slo.ttft: unknown key "ttft" (valid keys: e2el_ms`},
		{"capacity:\n  slo: {ttft_ms: 250}\n  arrivals: poison\n", `capacity.arrivals: unknown value "poison" (did you mean "poisson"?)`},
		{"capacity:\n  slo: {ttft_ms: 250}\n  sweep: 2\n", `unknown key "sweep" (did you mean "sweeps"?)`},
		{"capacity:\n  slo: {ttft_ms: 250}\n  sweeps: 9\n", "capacity.sweeps: 9 sweeps"},
		{"capacity:\n  slo: {ttft_ms: 250}\n  threshold: 0%\n", "capacity.threshold"},
		{"capacity:\n  slo: {ttft_ms: 250}\n  step: 10ms\n", "capacity.step: a step of 10ms"},
		{"soak:\n  duration: 48h\n", "soak.duration: a soak of 48h0m0s"},
		{"soak:\n  duration: 1h\n  window: 40m\n", "soak.window"},
		{"soak:\n  rate: 0\n", "soak.rate: 0 requests/s"},
		{"soak:\n  thresholds: {min_samples: 1}\n", "soak min_samples is 1"},
		{"soak:\n  nighty: true\n", `unknown key "nighty" (did you mean "nightly"?)`},
	}
	for _, tc := range invalid {
		_, err := Parse(DefaultPath, []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
}
