package gate

import (
	"math"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// cpuRuns makes runs whose engine used ms of CPU per output token, each
// scaled by exp(σ·dev[i]), over 320 output tokens.
func cpuRuns(ms, sigma float64) []*result.Result {
	out := make([]*result.Result, len(dev))
	for i, e := range dev {
		r := &result.Result{Completed: 40, TotalOutputTokens: 320, Metrics: map[string]float64{}, Perfgate: env()}
		r.Perfgate.EngineCPUSeconds = ms * math.Exp(sigma*e) * 320 / 1000
		out[i] = r
	}
	return out
}

// The engine's CPU per output token is its CPU seconds over the run's
// output tokens; a run the agent did not measure (a bench by hand, the
// sim) has no value rather than a zero.
func TestEngineCPUPerToken(t *testing.T) {
	t.Parallel()
	m, ok := config.LookupMetric("engine_cpu_per_token")
	if !ok || m.Natural != config.HigherIsWorse {
		t.Fatalf("engine_cpu_per_token: %+v, %v", m, ok)
	}
	for _, tc := range []struct {
		name   string
		r      result.Result
		want   float64
		wantOK bool
	}{
		{"measured", result.Result{TotalOutputTokens: 320, Perfgate: &result.Section{EngineCPUSeconds: 0.768}}, 2.4, true},
		{"not measured", result.Result{TotalOutputTokens: 320, Perfgate: &result.Section{}}, 0, false},
		{"no perfgate section", result.Result{TotalOutputTokens: 320}, 0, false},
		{"no output tokens", result.Result{Perfgate: &result.Section{EngineCPUSeconds: 0.5}}, 0, false},
	} {
		got, ok := runValue(&tc.r, m, newSeriesCache())
		if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
	// Gated: a model with twice the work per token regresses; the same
	// engine passes, its check row in ms per token.
	tr := tier(0.15, 3, "engine_cpu_per_token")
	base := cpuRuns(2.4, 0.03)
	if rep := compare(t, base, cpuRuns(5.1, 0.03), tr, Options{}); rep.Verdict != Regression {
		t.Errorf("2.1× the CPU per token: %s", rep.Verdict)
	}
	rep := compare(t, base, cpuRuns(2.4, 0.03), tr, Options{})
	if rep.Verdict != Pass {
		t.Errorf("the same engine: %s %+v", rep.Verdict, rep.Metrics)
	}
	if v := metric(t, rep, "engine_cpu_per_token").ValueText(2.4); v != "2.40 ms/tok" {
		t.Errorf("shown as %q", v)
	}
}
