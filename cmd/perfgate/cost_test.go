package main

import (
	"bytes"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// perfgate compare states a regression's cost when the config declares a
// price, as the check run does.
func TestCompareStatesTheCost(t *testing.T) {
	t.Parallel()
	priced, err := config.Parse(config.DefaultPath, []byte("cost:\n  gpu_hour_usd: 4\n  gpus: 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := &gate.Report{Verdict: gate.Regression, Metrics: []gate.MetricResult{{Metric: "output_throughput", Estimate: -0.09, Verdict: gate.MetricRegression}}}
	pass := &gate.Report{Verdict: gate.Pass, Metrics: reg.Metrics}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		rep  *gate.Report
		want string
	}{
		{"priced regression", priced, reg, "\nCost: output throughput −9.0%: 1.10× the GPU-hours for the same traffic, +$2,888 a month at 10 GPUs ($4.00/GPU-hour).\nAssumes the fleet is sized by throughput"},
		{"pass", priced, pass, ""},
		{"no price", config.Default(), reg, ""},
	} {
		var b bytes.Buffer
		if err := writeCost(&b, tc.cfg, tc.rep); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); (tc.want == "") != (got == "") || !bytes.HasPrefix(b.Bytes(), []byte(tc.want)) {
			t.Errorf("%s: %q, want %q…", tc.name, got, tc.want)
		}
	}
}
