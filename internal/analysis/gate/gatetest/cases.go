// Package gatetest holds verdict documents made by the real gate, one for
// each rule that can decide, for the tests of every surface that renders
// them (the check run, the PR comment, the check page, `perfgate
// compare`). The runs behind each are built from fixed deviations, so the
// documents are the same on every machine; no document is written by hand.
package gatetest

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// spec makes one case's document.
type spec struct {
	name, rule string
	make       func() (*gate.Report, error)
}

// Case is one verdict document and the rule it shows.
type Case struct {
	Name   string
	Rule   string // the report's gate.Rule* that decided
	Report *gate.Report
}

// Cases returns a document for each rule that can decide a verdict:
// regression, equivalence pass, last-look pass, improvement, inconclusive
// with runs still to add, inconclusive at the plan's last look,
// environment mismatch and too few runs; and the long runs' (capacity
// and soak, see longRunCases) made from recorded sweeps and soaks. It fails when the gate no longer
// produces one of them from its inputs.
func Cases() ([]Case, error) {
	levels := map[string]float64{"median_tpot_ms": 17.6, "output_throughput": 2205.3, "p99_ttft_ms": 182.4}
	all := []string{"tpot_median", "output_throughput", "ttft_p99"}
	stored := func(sigma, shift float64, shifted string, tr config.Tier, opt gate.Options) func() (*gate.Report, error) {
		return func() (*gate.Report, error) {
			return gate.Compare(Runs(levels, sigma, 0, ""), Runs(levels, sigma, shift, shifted), tr, opt)
		}
	}
	half := Tier("merge", 0.05, all...)
	half.RegressionAt = config.RegressionAtHalf
	specs := []spec{
		{"regression", gate.RuleRegressionTest, stored(0.01, math.Log(1.186), "median_tpot_ms", Tier("merge", 0.05, all...), gate.Options{})},
		{"pass", gate.RuleEquivalence, stored(0.01, math.Log(1.004), "median_tpot_ms", Tier("merge", 0.05, all...), gate.Options{})},
		{"improvement", gate.RuleEquivalence, stored(0.01, math.Log(1.08), "output_throughput", Tier("merge", 0.05, all...), gate.Options{})},
		{"last_look", gate.RuleLastLook, func() (*gate.Report, error) { return lastLook(levels, half) }},
		{"inconclusive_more_runs", gate.RuleOpen, stored(0.04, math.Log(1.04), "median_tpot_ms", Tier("merge", 0.05, all...), gate.Options{})},
		{"inconclusive_last_look", gate.RuleOpen, stored(0.04, math.Log(1.04), "median_tpot_ms", Tier("merge", 0.05, all...), gate.Options{LastLook: true})},
		{"environment", gate.RuleEnvironment, func() (*gate.Report, error) {
			c := Runs(levels, 0.01, 0, "")
			for _, r := range c {
				r.Perfgate.Environment.Driver = "555.42"
			}
			return gate.Compare(Runs(levels, 0.01, 0, ""), c, Tier("merge", 0.05, all...), gate.Options{})
		}},
		{"too_few_runs", gate.RuleTooFewRuns, func() (*gate.Report, error) {
			return gate.Compare(Runs(levels, 0.01, 0, ""), Runs(levels, 0.01, 0, "")[:2], Tier("quick", 0.15, all...), gate.Options{})
		}},
	}
	long, err := longRunCases()
	if err != nil {
		return nil, err
	}
	specs = append(specs, long...)
	var out []Case
	for _, s := range specs {
		rep, err := s.make()
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", s.name, err)
		}
		if rep.Rule != s.rule {
			return nil, fmt.Errorf("case %s: decided by %q, want %q (%s)", s.name, rep.Rule, s.rule, rep.Headline)
		}
		out = append(out, Case{Name: s.name, Rule: s.rule, Report: rep})
	}
	return out, nil
}

// Named is the case called name (Cases' Name).
func Named(name string) (Case, error) {
	cs, err := Cases()
	if err != nil {
		return Case{}, err
	}
	for _, c := range cs {
		if c.Name == name {
			return c, nil
		}
	}
	return Case{}, fmt.Errorf("gatetest has no case %q", name)
}

// lastLook finds, on a fixed grid, the runs whose second and last look
// passes by the last-look rule: an estimate below the regression line
// (half the threshold) whose equivalence bound is still past the
// threshold. The first look spends part of the plan, as a retest would.
func lastLook(levels map[string]float64, tr config.Tier) (*gate.Report, error) {
	for sigma := 0.010; sigma <= 0.06; sigma += 0.002 {
		for shift := 0.0; shift <= 0.03; shift += 0.002 {
			base, cand := Runs(levels, sigma, 0, ""), Runs(levels, sigma, math.Log1p(shift), "median_tpot_ms")
			first, err := gate.Compare(base, cand, tr, gate.Options{})
			if err != nil {
				return nil, err
			}
			rep, err := gate.Compare(base, append(cand, Runs(levels, sigma, math.Log1p(shift), "median_tpot_ms")...), tr,
				gate.Options{Looks: first.Looks, LastLook: true, CandidateSessions: sessions(len(cand), len(cand))})
			if err != nil {
				return nil, err
			}
			if rep.Rule == gate.RuleLastLook {
				return rep, nil
			}
		}
	}
	return nil, fmt.Errorf("no runs on the grid pass by the last-look rule")
}

func sessions(counts ...int) []string {
	var out []string
	for i, n := range counts {
		for range n {
			out = append(out, fmt.Sprint(i+1))
		}
	}
	return out
}

// dev are symmetric run deviations: 5 vs 5 runs have a pooled variance of
// 0.625σ² and a standard error of the difference of 0.5σ.
var dev = []float64{-1, -0.5, 0, 0.5, 1}

// Runs makes five runs whose vLLM key k has value level·exp(σ·dev[i]),
// times exp(shift) for the key named shifted.
func Runs(levels map[string]float64, sigma, shift float64, shifted string) []*result.Result {
	out := make([]*result.Result, len(dev))
	for i, e := range dev {
		r := &result.Result{Completed: 1000, Metrics: map[string]float64{}, Perfgate: Section()}
		for k, v := range levels {
			s := 0.0
			if k == shifted {
				s = shift
			}
			x := v * math.Exp(sigma*e+s)
			if k == "output_throughput" {
				r.OutputThroughput = x
				continue
			}
			r.Metrics[k] = x
		}
		out[i] = r
	}
	return out
}

// Section is a run's perfgate section on a GPU runner.
func Section() *result.Section {
	return &result.Section{
		Environment: result.Environment{GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-1", GPUCount: 1, Driver: "550.54", CUDA: "12.4", EngineImage: "vllm@sha256:ab"},
		Load:        result.Load{Endpoint: "/v1/completions", Model: "m", Dataset: "random", NumPrompts: 1000, RequestRate: result.Inf},
		DatasetHash: "sha256:1",
		GPU:         &result.GPUSummary{Available: true, Valid: true, Series: map[string]result.Aggregate{"mem_used_mib": {Max: 70000}, "power_w": {Mean: 500}}},
	}
}

// Tier gates metrics at limit, each in its natural direction.
func Tier(name string, limit float64, metrics ...string) config.Tier {
	t := config.Tier{Name: name, Repeats: 5, Confidence: 0.995, NoiseSigmas: 3, Metrics: map[string]config.Threshold{}}
	for _, m := range metrics {
		info, _ := config.LookupMetric(m)
		t.Metrics[m] = config.Threshold{Limit: limit, Direction: info.Natural}
	}
	return t
}
