package gate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// dev are symmetric run deviations: with them 5 vs 5 runs have a pooled
// variance of 0.625σ² and a standard error of the difference of 0.5σ.
var dev = []float64{-1, -0.5, 0, 0.5, 1}

func env() *result.Section {
	return &result.Section{
		Environment: result.Environment{GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-1", GPUCount: 1, Driver: "550.54", CUDA: "12.4", EngineImage: "vllm@sha256:ab"},
		Load:        result.Load{Endpoint: "/v1/completions", Model: "m", Dataset: "random", NumPrompts: 1000, RequestRate: result.Inf},
		DatasetHash: "sha256:1",
		GPU:         &result.GPUSummary{Available: true, Valid: true, Series: map[string]result.Aggregate{"mem_used_mib": {Max: 70000}, "power_w": {Mean: 500}}},
	}
}

// runs makes n runs whose metric k has value level·exp(σ·dev[i] + shift).
func runs(levels map[string]float64, sigma, shift float64, shifted ...string) []*result.Result {
	out := make([]*result.Result, len(dev))
	for i, e := range dev {
		r := &result.Result{Completed: 1000, Metrics: map[string]float64{}, Perfgate: env()}
		for k, v := range levels {
			s := 0.0
			for _, sk := range shifted {
				if sk == k {
					s = shift
				}
			}
			x := v * math.Exp(sigma*e+s)
			switch k {
			case "output_throughput":
				r.OutputThroughput = x
			case "gpu_mem_used_mib":
				r.Perfgate.GPU.Series["mem_used_mib"] = result.Aggregate{Max: x}
			default:
				r.Metrics[k] = x
			}
		}
		out[i] = r
	}
	return out
}

func tier(limit float64, sigmas float64, metrics ...string) config.Tier {
	t := config.Tier{Name: "test", Repeats: 5, Confidence: 0.995, NoiseSigmas: sigmas, Metrics: map[string]config.Threshold{}}
	for _, m := range metrics {
		info, _ := config.LookupMetric(m)
		t.Metrics[m] = config.Threshold{Limit: limit, Direction: info.Natural}
	}
	return t
}

func metric(t *testing.T, rep *Report, name string) MetricResult {
	t.Helper()
	for _, m := range rep.Metrics {
		if m.Metric == name {
			return m
		}
	}
	t.Fatalf("no metric %s in %+v", name, rep.Metrics)
	return MetricResult{}
}

func compare(t *testing.T, b, c []*result.Result, tr config.Tier, opt Options) *Report {
	t.Helper()
	rep, err := Compare(b, c, tr, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

var lat = map[string]float64{"p99_tpot_ms": 14}

// A real but small change (3%, measured precisely) stays under a 5%
// threshold; the same change regresses against a 2% one.
func TestThreshold(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.002, 0), runs(lat, 0.002, math.Log(1.03), "p99_tpot_ms")
	if rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{}); rep.Verdict != Pass || metric(t, rep, "tpot_p99").Verdict != MetricPass {
		t.Errorf("3%% under a 5%% threshold: %s / %+v", rep.Verdict, rep.Metrics)
	}
	if rep := compare(t, b, c, tier(0.02, 3, "tpot_p99"), Options{}); rep.Verdict != Regression {
		t.Errorf("3%% over a 2%% threshold: %s", rep.Verdict)
	}
}

// The baseline's history says runs scatter by 3%: a 4% change is inside
// the noise band even though today's runs are tight enough to make it
// significant.
func TestNoiseBand(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.002, 0), runs(lat, 0.002, math.Log(1.04), "p99_tpot_ms")
	set := runs(lat, 0.04, 0)[1:4]                                  // −2%, 0, +2%
	set = append(set, runs(lat, 0.03, 0)[0], runs(lat, 0.03, 0)[4]) // −3%, +3%: sd 2.5%, mean 0
	opt := Options{History: History{Sessions: []Session{{Label: "a/a", Runs: set}}}}
	rep := compare(t, b, c, tier(0.01, 3, "tpot_p99"), opt)
	m := metric(t, rep, "tpot_p99")
	if !m.Significant || m.Verdict == MetricRegression {
		t.Errorf("inside the noise band: significant=%v verdict=%s band=%.3f", m.Significant, m.Verdict, m.NoiseBand)
	}
	if rep := compare(t, b, c, tier(0.01, 0, "tpot_p99"), opt); rep.Verdict != Regression {
		t.Errorf("without a noise band the same data regresses; got %s", rep.Verdict)
	}
}

// A 10% change in noisy runs, beyond threshold and band (the history is
// tight), is not called while the test cannot tell it from noise.
func TestSignificance(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.16, 0), runs(lat, 0.16, math.Log(1.10), "p99_tpot_ms")
	hist := History{Sessions: []Session{{Runs: runs(lat, 0.01, 0)[:3]}}}
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{History: hist})
	m := metric(t, rep, "tpot_p99")
	if m.Significant || m.Verdict == MetricRegression || rep.Verdict != Inconclusive || rep.NeedMoreRuns != 10 {
		t.Errorf("not significant: %+v, verdict %s, need %d", m, rep.Verdict, rep.NeedMoreRuns)
	}
	// A small CI lower bound above zero is what makes it significant.
	if m.CILow > 0 {
		t.Errorf("interval %.3f..%.3f should include 0", m.CILow, m.CIHigh)
	}
}

// One metric at p = 0.7α regresses alone; in a family of two, Holm asks it
// for p ≤ α/2.
func TestHolm(t *testing.T) {
	t.Parallel()
	const sigma = 0.02
	alpha := (1 - 0.995) / 2
	d := stats.TQuantile(1-0.7*alpha, 8) * 0.5 * sigma
	levels := map[string]float64{"p99_tpot_ms": 14, "median_ttft_ms": 200}
	b, c := runs(levels, sigma, 0), runs(levels, sigma, d, "p99_tpot_ms")
	if rep := compare(t, b, c, tier(0.001, 0, "tpot_p99"), Options{}); rep.Verdict != Regression {
		t.Fatalf("alone: %s %+v", rep.Verdict, rep.Metrics)
	}
	rep := compare(t, b, c, tier(0.001, 0, "tpot_p99", "ttft_median"), Options{})
	if m := metric(t, rep, "tpot_p99"); m.Verdict == MetricRegression || math.Abs(m.HolmP-1.4*alpha) > 1e-4 {
		t.Errorf("with Holm over 2 metrics: verdict %s, holm p %.5f want %.5f", m.Verdict, m.HolmP, 1.4*alpha)
	}
}

func TestEnvironmentMismatch(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.002, 0), runs(lat, 0.002, math.Log(1.2), "p99_tpot_ms")
	for _, r := range c {
		r.Perfgate.Environment.Driver = "555.42"
		r.Perfgate.Load.MaxConcurrency = 64
	}
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
	want := []Mismatch{{"driver_version", "550.54", "555.42"}, {"load.max_concurrency", "0", "64"}}
	if rep.Verdict != Inconclusive || !reflect.DeepEqual(rep.Mismatches, want) || rep.NeedMoreRuns != 0 {
		t.Errorf("verdict %s mismatches %+v need %d", rep.Verdict, rep.Mismatches, rep.NeedMoreRuns)
	}
}

func TestInvalidRunsExcluded(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	// A throttled run reads 50% slow; kept, it would be a regression.
	c[2].Metrics["p99_tpot_ms"] *= 1.5
	c[2].Perfgate.GPU.Valid = false
	c[2].Perfgate.GPU.Invalid = []string{"sm clock throttled: 1410 MHz < 1980 MHz"}
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
	if rep.Verdict != Pass || rep.CandidateRuns != 4 || len(rep.ExcludedRuns) != 1 || !strings.Contains(rep.ExcludedRuns[0], "candidate run 3") {
		t.Errorf("verdict %s runs %d excluded %v", rep.Verdict, rep.CandidateRuns, rep.ExcludedRuns)
	}
	c[0].Perfgate.GPU.Valid, c[1].Perfgate.GPU.Valid = false, false
	c[0].Perfgate.GPU.Invalid, c[1].Perfgate.GPU.Invalid = []string{"x"}, []string{"y"}
	if rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{}); rep.Verdict != Inconclusive || rep.CandidateRuns != 2 || rep.NeedMoreRuns != 5 {
		t.Errorf("2 valid runs: %s %d need %d", rep.Verdict, rep.CandidateRuns, rep.NeedMoreRuns)
	}
}

// A run whose benchmark client was the bottleneck measured the client: it
// is excluded as a throttled GPU's run is.
func TestClientBoundRunsExcluded(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	c[1].Metrics["p99_tpot_ms"] *= 1.5
	c[1].Perfgate.Client = &result.ClientCheck{ClientBound: true, Reason: "client CPU 97% of 2 cores"}
	c[3].Perfgate.Client = &result.ClientCheck{ClientBound: false}
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
	if rep.Verdict != Pass || rep.CandidateRuns != 4 || len(rep.ExcludedRuns) != 1 ||
		!strings.Contains(rep.ExcludedRuns[0], "candidate run 2: client-bound: client CPU 97% of 2 cores") {
		t.Errorf("verdict %s runs %d excluded %v", rep.Verdict, rep.CandidateRuns, rep.ExcludedRuns)
	}
}

// Higher latency and lower throughput are worse; the opposite moves are
// improvements and pass.
func TestDirectionsAndImprovements(t *testing.T) {
	t.Parallel()
	levels := map[string]float64{"p99_tpot_ms": 14, "output_throughput": 5000}
	tr := tier(0.05, 3, "tpot_p99", "output_throughput")
	cases := []struct {
		metric  string
		shift   float64
		verdict Verdict
		mv      string
	}{
		{"output_throughput", math.Log(0.85), Regression, MetricRegression},
		{"output_throughput", math.Log(1.15), Pass, MetricImprovement},
		{"p99_tpot_ms", math.Log(1.15), Regression, MetricRegression},
		{"p99_tpot_ms", math.Log(0.85), Pass, MetricImprovement},
	}
	for _, tc := range cases {
		rep := compare(t, runs(levels, 0.005, 0), runs(levels, 0.005, tc.shift, tc.metric), tr, Options{})
		name := map[string]string{"output_throughput": "output_throughput", "p99_tpot_ms": "tpot_p99"}[tc.metric]
		m := metric(t, rep, name)
		if rep.Verdict != tc.verdict || m.Verdict != tc.mv || math.Abs(m.Delta-(math.Exp(tc.shift)-1)) > 1e-9 {
			t.Errorf("%s %+.0f%%: verdict %s, metric %s delta %.3f", tc.metric, 100*(math.Exp(tc.shift)-1), rep.Verdict, m.Verdict, m.Delta)
		}
	}
}

// The medians of runs, kept as context, do not move for one odd run.
func TestMedianOfRuns(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	c[4].Metrics["p99_tpot_ms"] = 1000
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
	m := metric(t, rep, "tpot_p99")
	if m.CandidateMedian != c[2].Metrics["p99_tpot_ms"] || m.BaselineMedian != b[2].Metrics["p99_tpot_ms"] {
		t.Errorf("candidate median %.3f baseline median %.3f: want the middle runs' values", m.CandidateMedian, m.BaselineMedian)
	}
	if m.Verdict == MetricRegression {
		t.Error("one outlier run among five called a regression")
	}
}

func TestTooFewRuns(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.01, 0), runs(lat, 0.01, math.Log(1.3), "p99_tpot_ms")
	rep := compare(t, b, c[:2], tier(0.05, 3, "tpot_p99"), Options{})
	if rep.Verdict != Inconclusive || rep.NeedMoreRuns != 5 {
		t.Errorf("2 candidate runs: %s need %d", rep.Verdict, rep.NeedMoreRuns)
	}
	if rep := compare(t, b[:2], c, tier(0.05, 3, "tpot_p99"), Options{}); rep.Verdict != Inconclusive {
		t.Errorf("2 baseline runs: %s", rep.Verdict)
	}
}

// Inconclusive asks for double the runs at every look of the plan but the
// last; at the last it says a maintainer decides.
func TestNeedMoreRuns(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.16, 0), runs(lat, 0.16, math.Log(1.10), "p99_tpot_ms")
	rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{})
	if rep.Verdict != Inconclusive || rep.NeedMoreRuns != 10 {
		t.Fatalf("%s need %d", rep.Verdict, rep.NeedMoreRuns)
	}
	c = append(c, runs(lat, 0.16, math.Log(1.10), "p99_tpot_ms")...)
	if rep := compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{Looks: rep.Looks}); rep.Verdict != Inconclusive || rep.NeedMoreRuns != 20 {
		t.Errorf("after doubling: %s need %d", rep.Verdict, rep.NeedMoreRuns)
	}
	last := Looks{Max: 2, Spent: []Look{{Alpha: 0.001}}}
	rep = compare(t, b, c, tier(0.05, 3, "tpot_p99"), Options{Looks: last})
	if rep.Verdict != Inconclusive || rep.NeedMoreRuns != 0 || !strings.Contains(strings.Join(rep.Notes, " "), "last look") {
		t.Errorf("last look: %s need %d, notes %q", rep.Verdict, rep.NeedMoreRuns, rep.Notes)
	}
}

func TestSecondaryNeverBlocks(t *testing.T) {
	t.Parallel()
	levels := map[string]float64{"p99_tpot_ms": 14, "gpu_mem_used_mib": 70000}
	tr := tier(0.05, 3, "tpot_p99")
	tr.Secondary = map[string]config.Threshold{"gpu_mem_used": {Limit: 0.10, Direction: config.HigherIsWorse}}
	rep := compare(t, runs(levels, 0.005, 0), runs(levels, 0.005, math.Log(1.3), "gpu_mem_used_mib"), tr, Options{})
	m := metric(t, rep, "gpu_mem_used")
	if rep.Verdict != Pass || m.Verdict != MetricRegression || !m.Secondary {
		t.Errorf("verdict %s, gpu_mem_used %s", rep.Verdict, m.Verdict)
	}
}

func TestUnchangedShowsTilde(t *testing.T) {
	t.Parallel()
	rep := compare(t, runs(lat, 0.02, 0), runs(lat, 0.02, 0), tier(0.05, 3, "tpot_p99"), Options{})
	if rep.Verdict != Pass || metric(t, rep, "tpot_p99").Verdict != MetricSame {
		t.Errorf("%s %+v", rep.Verdict, rep.Metrics)
	}
}

// Plain vLLM save-result files compare, from their aggregates and, for
// keys vLLM did not write, their per-request arrays.
func TestVLLMFiles(t *testing.T) {
	t.Parallel()
	base, err := LoadRuns("../../../testdata/gate/vllm-baseline.json")
	if err != nil {
		t.Fatal(err)
	}
	var cand []*result.Result
	for i := 1; i <= 3; i++ {
		rs, err := LoadRuns(filepath.Join("../../../testdata/gate", "vllm-candidate-"+string(rune('0'+i))+".json"))
		if err != nil {
			t.Fatal(err)
		}
		cand = append(cand, rs...)
	}
	tr := tier(0.15, 3, "ttft_median", "tpot_p99", "itl_p90", "e2el_median", "output_throughput")
	rep := compare(t, base, cand, tr, Options{})
	if len(base) != 3 || rep.Verdict == Regression || len(rep.Mismatches) != 0 {
		t.Errorf("vLLM files: %d runs, %s, %+v", len(base), rep.Verdict, rep.Mismatches)
	}
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "environment unknown") {
		t.Errorf("notes %v: want the environment-unknown note", rep.Notes)
	}
	itl := metric(t, rep, "itl_p90") // not a vLLM key: computed from itls
	if itl.Baseline <= 0 || itl.Note != "" {
		t.Errorf("itl_p90 from arrays: %+v", itl)
	}
	if ttft := metric(t, rep, "ttft_median"); ttft.BaselineMedian != stats.Median([]float64{base[0].Metrics["median_ttft_ms"], base[1].Metrics["median_ttft_ms"], base[2].Metrics["median_ttft_ms"]}) {
		t.Errorf("ttft_median should come from vLLM's key: %v", ttft.BaselineMedian)
	}
}

func TestLoadRunsLayouts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one := runs(lat, 0.01, 0)
	write := func(name string, v any) string {
		p := filepath.Join(dir, name)
		data, _ := json.Marshal(v)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		path string
		want int
	}{
		{write("single.json", one[0]), 1},
		{write("array.json", one), 5},
		{write("baseline.json", map[string]any{"version": "v0.26.0", "commit": "abc", "runs": one[:3], "metadata": map[string]string{"gpu": "H100"}}), 3},
	}
	for _, tc := range cases {
		rs, err := LoadRuns(tc.path)
		if err != nil || len(rs) != tc.want || rs[0].Metrics["p99_tpot_ms"] != one[0].Metrics["p99_tpot_ms"] {
			t.Errorf("%s: %d runs, %v", tc.path, len(rs), err)
		}
	}
	if _, err := LoadRuns(write("bad.json", map[string]int{"x": 1})); err == nil {
		t.Error("not a result: want an error")
	}
	// vLLM's --append-result: one run per line.
	if rs, err := LoadRuns("../../../testdata/vllm/append-result-two-runs.jsonl"); err != nil || len(rs) != 2 || rs[1].Metrics["mean_ttft_ms"] != 210 {
		t.Errorf("appended file: %d runs, %v", len(rs), err)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	if Pass.ExitCode() != 0 || Regression.ExitCode() != 1 || Inconclusive.ExitCode() != 2 {
		t.Error("exit codes")
	}
}

// A row never reads backwards: the value columns are the baseline's centre
// and that centre moved by the estimate, so the candidate's column is
// higher exactly when Δ is positive, and their ratio is Δ — whatever the
// noise, the design or an outlier run.
func TestRowsNeverReadBackwards(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 9))
	levels := map[string]float64{"p99_tpot_ms": 14, "output_throughput": 5000, "median_e2el_ms": 1000}
	tr := tier(0.05, 3, "tpot_p99", "output_throughput", "e2el_median")
	for i := range 200 {
		cv := 0.01 + 0.2*rng.Float64()
		b := noisyRuns(rng, levels, cv, 0, 5)
		c := noisyRuns(rng, levels, cv, 0.3*(rng.Float64()-0.5), 5)
		if i%3 == 0 {
			c[rng.IntN(len(c))].Metrics["p99_tpot_ms"] *= 3 // an outlier run
		}
		rep := compare(t, b, c, tr, Options{})
		if len(rep.Metrics) != 3 {
			t.Fatalf("trial %d: %d rows", i, len(rep.Metrics))
		}
		for _, m := range rep.Metrics {
			if !m.Measured() {
				t.Fatalf("trial %d %s: %s", i, m.Metric, m.Note)
			}
			if m.Delta != m.Estimate || math.Abs(m.Candidate/m.Baseline-1-m.Estimate) > 1e-9 {
				t.Fatalf("trial %d %s: %s → %s with Δ %s", i, m.Metric, m.ValueText(m.Baseline), m.ValueText(m.Candidate), m.DeltaText())
			}
		}
	}
}

func noisyRuns(rng *rand.Rand, levels map[string]float64, cv, shift float64, n int) []*result.Result {
	out := make([]*result.Result, n)
	for i := range out {
		r := &result.Result{Completed: 1000, Metrics: map[string]float64{}, Perfgate: env()}
		for k, v := range levels {
			r.Metrics[k] = v * math.Exp(shift+cv*rng.NormFloat64())
		}
		r.OutputThroughput = r.Metrics["output_throughput"]
		out[i] = r
	}
	return out
}
