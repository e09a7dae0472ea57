package gate

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"text/tabwriter"

	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/result"
)

// NoiseModel is how run values scatter from run to run in a simulation.
type NoiseModel struct {
	Name string
	CV   float64 // run-to-run coefficient of variation of every metric
	// TailDF, when > 0, draws the noise from Student's t with this many
	// degrees of freedom (scaled to the same CV) instead of the normal.
	TailDF float64
	// OutlierProb is the chance that a whole run is slow: every latency
	// up and every throughput down by OutlierShift (in CVs).
	OutlierProb  float64
	OutlierShift float64
}

// DefaultNoiseModels are the ones the issue asks for.
var DefaultNoiseModels = []NoiseModel{
	{Name: "normal, CV 2%", CV: 0.02},
	{Name: "normal, CV 5%", CV: 0.05},
	{Name: "t(5) CV 2% + 3% outlier runs", CV: 0.02, TailDF: 5, OutlierProb: 0.03, OutlierShift: 4},
	{Name: "t(5) CV 5% + 3% outlier runs", CV: 0.05, TailDF: 5, OutlierProb: 0.03, OutlierShift: 4},
}

// SimConfig sets up a simulation of many gates.
type SimConfig struct {
	Tier         config.Tier
	Gates        int     // per model, for the false-alarm and the detection rate each
	Runs         int     // candidate runs (the tier's repeats)
	BaselineRuns int     // runs in the stored baseline
	HistorySets  int     // earlier A/A run sets of BaselineRuns runs for the prior; 0 = none
	Delta        float64 // the true regression injected into tpot_p99, e.g. 0.08
	Seed         uint64
	Models       []NoiseModel
	// Sweep, when set, also finds the smallest tpot_p99 regression each
	// rule catches with 80% and 95% probability, over these deltas.
	Sweep      []float64
	SweepGates int
}

// SimRow is one rule under one noise model.
type SimRow struct {
	Model, Rule string
	FalseAlarm  float64 // share of A/A gates called a regression
	Detection   float64 // share of gates with a true Delta called a regression
	// Inconclusive is the share of regressed gates left inconclusive.
	Inconclusive float64
	MeanRuns     float64 // candidate runs spent per regressed gate
	Min80, Min95 float64 // smallest swept delta detected that often; NaN if none
}

// Rules in the simulation.
const (
	RuleNaive   = "naive: 1 run, |Δ| > 3% on tpot_p99"
	RuleGate    = "gate: runs vs baseline"
	RuleAutoAdd = "gate + auto-add runs once"
)

// Simulate runs the gates and returns a row per model and rule.
func Simulate(cfg SimConfig) ([]SimRow, error) {
	var rows []SimRow
	for mi, model := range cfg.Models {
		s := &simulator{cfg: cfg, model: model, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(mi)+1))}
		null, err := s.rates(0, cfg.Gates)
		if err != nil {
			return nil, err
		}
		alt, err := s.rates(cfg.Delta, cfg.Gates)
		if err != nil {
			return nil, err
		}
		var min80, min95 [3]float64
		for r := range min80 {
			min80[r], min95[r] = math.NaN(), math.NaN()
		}
		for _, d := range cfg.Sweep {
			sw, err := s.rates(d, cfg.SweepGates)
			if err != nil {
				return nil, err
			}
			for r := range sw {
				if math.IsNaN(min80[r]) && sw[r].detected >= 0.80 {
					min80[r] = d
				}
				if math.IsNaN(min95[r]) && sw[r].detected >= 0.95 {
					min95[r] = d
				}
			}
		}
		for r, name := range []string{RuleNaive, RuleGate, RuleAutoAdd} {
			rows = append(rows, SimRow{Model: model.Name, Rule: name, FalseAlarm: null[r].detected, Detection: alt[r].detected,
				Inconclusive: alt[r].inconclusive, MeanRuns: alt[r].runs, Min80: min80[r], Min95: min95[r]})
		}
	}
	return rows, nil
}

// WriteSimTable prints the rows as a table.
func WriteSimTable(w io.Writer, cfg SimConfig, rows []SimRow) error {
	fmt.Fprintf(w, "tier %s: %d candidate vs %d baseline runs, %d A/A history set(s), %d gates per cell, true regression +%.0f%% on tpot_p99, seed %d\n\n",
		cfg.Tier.Name, cfg.Runs, cfg.BaselineRuns, cfg.HistorySets, cfg.Gates, 100*cfg.Delta, cfg.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "noise\trule\tfalse alarm\tdetected\tinconclusive\truns used\tmin δ 80%\tmin δ 95%")
	pct := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.1f%%\t%.1f%%\t%.1f\t%s\t%s\n", r.Model, r.Rule, 100*r.FalseAlarm, 100*r.Detection,
			100*r.Inconclusive, r.MeanRuns, pct(r.Min80), pct(r.Min95))
	}
	return tw.Flush()
}

type simulator struct {
	cfg   SimConfig
	model NoiseModel
	rng   *rand.Rand
}

type rate struct{ detected, inconclusive, runs float64 }

// simMetricKeys orders simMetrics: drawing noise in map order would make a
// seeded simulation differ from run to run.
var simMetricKeys = func() []string {
	keys := make([]string, 0, len(simMetrics))
	for k := range simMetrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}()

// simMetrics are the typical levels of the merge tier's metrics.
var simMetrics = map[string]float64{
	"p99_tpot_ms": 14, "median_tpot_ms": 11, "p99_ttft_ms": 900, "median_ttft_ms": 250,
	"p99_itl_ms": 40, "median_itl_ms": 10, "p99_e2el_ms": 3000, "median_e2el_ms": 1800,
	"mean_ttft_ms": 300, "mean_tpot_ms": 11.5, "mean_itl_ms": 11, "mean_e2el_ms": 1900,
	"p90_ttft_ms": 700, "p90_tpot_ms": 13, "p95_ttft_ms": 800, "p95_tpot_ms": 13.5,
}

func (s *simulator) rates(delta float64, gates int) ([3]rate, error) {
	var out [3]rate
	for g := 0; g < gates; g++ {
		base := s.runs(s.cfg.BaselineRuns, 0)
		cand := s.runs(s.cfg.Runs, delta)
		var hist [][]*result.Result
		for h := 0; h < s.cfg.HistorySets; h++ {
			hist = append(hist, s.runs(s.cfg.BaselineRuns, 0))
		}
		// The seed's rule: one run each, 3% either way.
		b, c := base[0].Metrics["p99_tpot_ms"], cand[0].Metrics["p99_tpot_ms"]
		if math.Abs(c/b-1) > 0.03 {
			out[0].detected++
		}
		out[0].runs++
		rep, err := Compare(base, cand, s.cfg.Tier, Options{History: hist})
		if err != nil {
			return out, err
		}
		out[1].runs += float64(len(cand))
		if rep.Verdict == Regression {
			out[1].detected++
		}
		if rep.Verdict == Inconclusive {
			out[1].inconclusive++
		}
		if rep.Verdict == Inconclusive && rep.NeedMoreRuns > len(cand) {
			cand = append(cand, s.runs(rep.NeedMoreRuns-len(cand), delta)...)
			if rep, err = Compare(base, cand, s.cfg.Tier, Options{History: hist}); err != nil {
				return out, err
			}
		}
		out[2].runs += float64(len(cand))
		switch rep.Verdict {
		case Regression:
			out[2].detected++
		case Inconclusive:
			out[2].inconclusive++
		}
	}
	for i := range out {
		out[i].detected /= float64(gates)
		out[i].inconclusive /= float64(gates)
		out[i].runs /= float64(gates)
	}
	return out, nil
}

// runs makes n synthetic results carrying only the aggregate keys. A run's
// noise is half shared by its metrics (the card's state moves them
// together: latencies up, throughputs down) and half its own.
func (s *simulator) runs(n int, delta float64) []*result.Result {
	out := make([]*result.Result, n)
	for i := range out {
		shared := s.noise()
		if s.rng.Float64() < s.model.OutlierProb {
			shared += s.model.OutlierShift
		}
		r := &result.Result{Metrics: make(map[string]float64, len(simMetrics)), Completed: 1000, Perfgate: &result.Section{}}
		f := func(level float64) float64 {
			z := math.Sqrt(0.5)*shared + math.Sqrt(0.5)*s.noise()
			return level * math.Exp(s.model.CV*z)
		}
		for _, k := range simMetricKeys {
			r.Metrics[k] = f(simMetrics[k])
		}
		r.Metrics["p99_tpot_ms"] *= 1 + delta
		inv := func(level float64) float64 { return level * level / f(level) }
		r.OutputThroughput = inv(5000)
		r.RequestThroughput = inv(40)
		r.TotalTokenThroughput = inv(45000)
		out[i] = r
	}
	return out
}

// noise is a unit-variance draw from the model's distribution.
func (s *simulator) noise() float64 {
	if s.model.TailDF <= 2 {
		return s.rng.NormFloat64()
	}
	nu := s.model.TailDF
	chi := 0.0
	for range int(nu) {
		z := s.rng.NormFloat64()
		chi += z * z
	}
	t := s.rng.NormFloat64() / math.Sqrt(chi/nu)
	return t / math.Sqrt(nu/(nu-2))
}
