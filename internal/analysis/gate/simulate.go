package gate

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/perfgate/perfgate/internal/vocab/config"
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

// SimConfig sets up a simulation of many gates the way production runs
// them: every set of runs is one session (an engine start) with its own
// shift, runs within a session drift, the first judgement adds runs once
// when inconclusive, and each retest adds a session and judges all the
// evidence again at the next look's α.
type SimConfig struct {
	Tier   config.Tier
	Design string // DesignStored or DesignInterleaved
	Gates  int    // per model and rate
	// Runs is the candidate's runs per session (stored) or pairs per job
	// (interleaved); BaselineRuns the runs of the stored baseline and of
	// each history session.
	Runs         int
	BaselineRuns int
	// HistorySets is how many earlier sessions of unchanged code (stored
	// baselines, A/A sets) the gate gets as its noise history; 0 is a
	// repository whose history is empty.
	HistorySets int
	// SessionCV is the session-to-session shift: every run of a session
	// is scaled by exp(SessionCV·z), z shared by the session.
	SessionCV float64
	// Drift is the step of a random walk within a session, per run, in the
	// same units (a slow thermal or clock drift shared by every metric).
	Drift float64
	// Metric is the gated metric a true regression is injected into;
	// Deltas the regressions whose detection rates are reported.
	Metric string
	Deltas []float64
	// Retests is the length of the retest sequence whose cumulative false
	// alarms are reported (0…Retests).
	Retests int
	Seed    uint64
	Models  []NoiseModel
	// Sweep, when set, also finds the smallest regression of Metric each
	// rule catches with 80% and 95% probability, over these deltas.
	Sweep      []float64
	SweepGates int
	// World is what makes the runner harder than the model: engine-start
	// state, a history from elsewhere, outliers, few requests, missing
	// runs, per-metric noise. The zero World is the model alone.
	World World
}

// SimRow is one rule under one noise model.
type SimRow struct {
	Model, Rule string
	FalseAlarm  float64 // share of A/A gates called a regression at the first judgement
	// InconclusiveAA is the share of A/A gates left inconclusive: under
	// needs_ack, the unchanged PRs a maintainer must acknowledge.
	InconclusiveAA float64
	// Detection is the share of gates with a true regression Deltas[i]
	// called a regression; Inconclusive the share left inconclusive.
	Detection    []float64
	Inconclusive []float64
	MeanRuns     float64 // candidate runs (pairs) spent per A/A gate, before retests
	// Retest is the cumulative false-alarm rate after 1…Retests retests:
	// a regression called at any look so far (nil for rules without
	// looks).
	Retest       []float64
	Min80, Min95 float64 // smallest swept delta detected that often; NaN if none
}

// Rules in the simulation.
const (
	RuleNaive   = "naive: 1 run each, |Δ| > 3%"
	RuleGate    = "gate, first look only"
	RuleAutoAdd = "gate (adds runs once when inconclusive)"
)

// DefaultSimMetric is where simulated regressions go: the gated latency
// metric of the merge tier.
const DefaultSimMetric = "tpot_median"

// Simulate runs the gates and returns a row per model and rule.
func Simulate(cfg SimConfig) ([]SimRow, error) {
	if cfg.Design == "" {
		cfg.Design = DesignStored
		if cfg.Tier.Interleave {
			cfg.Design = DesignInterleaved
		}
	}
	if cfg.Design != DesignStored && cfg.Design != DesignInterleaved {
		return nil, fmt.Errorf("simulate: design %q: want %s or %s", cfg.Design, DesignStored, DesignInterleaved)
	}
	if cfg.Metric == "" {
		cfg.Metric = DefaultSimMetric
	}
	m, ok := config.LookupMetric(cfg.Metric)
	if !ok || m.Series == "" {
		return nil, fmt.Errorf("simulate: %q is not a latency metric", cfg.Metric)
	}
	if _, ok := simMetrics[m.Key]; !ok {
		return nil, fmt.Errorf("simulate: no simulated level for %s", m.Key)
	}
	if cfg.Runs < 1 || cfg.BaselineRuns < 1 || cfg.Gates < 1 {
		return nil, fmt.Errorf("simulate: need runs, baseline runs and gates ≥ 1")
	}
	// Secondary metrics never change a verdict: leave them out.
	cfg.Tier.Secondary = nil
	var rows []SimRow
	for mi, model := range cfg.Models {
		s := &simulator{cfg: cfg, model: model, key: m.Key, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(mi)+1))}
		null, err := s.rates(0, cfg.Gates, cfg.Retests)
		if err != nil {
			return nil, err
		}
		var alt [][3]rate
		for _, d := range cfg.Deltas {
			a, err := s.rates(d, cfg.Gates, 0)
			if err != nil {
				return nil, err
			}
			alt = append(alt, a)
		}
		var min80, min95 [3]float64
		for r := range min80 {
			min80[r], min95[r] = math.NaN(), math.NaN()
		}
		for _, d := range cfg.Sweep {
			sw, err := s.rates(d, cfg.SweepGates, 0)
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
			row := SimRow{Model: model.Name, Rule: name, FalseAlarm: null[r].detected, InconclusiveAA: null[r].inconclusive,
				MeanRuns: null[r].runs, Min80: min80[r], Min95: min95[r]}
			for _, a := range alt {
				row.Detection = append(row.Detection, a[r].detected)
				row.Inconclusive = append(row.Inconclusive, a[r].inconclusive)
			}
			if r == 2 {
				row.Retest = null[r].retest
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WriteSimTable prints the rows as a table.
func WriteSimTable(w io.Writer, cfg SimConfig, rows []SimRow) error {
	design := fmt.Sprintf("stored baseline: %d candidate vs %d baseline runs", cfg.Runs, cfg.BaselineRuns)
	if cfg.Design == DesignInterleaved || (cfg.Design == "" && cfg.Tier.Interleave) {
		design = fmt.Sprintf("interleaved: %d base/head pairs per job (ABBA)", cfg.Runs)
	}
	metric := cfg.Metric
	if metric == "" {
		metric = DefaultSimMetric
	}
	fmt.Fprintf(w, "tier %s, %s; history: %d earlier session(s) of %d runs; session shift %.1f%%, drift %.2f%%/run; regressions on %s; %d gates per cell, seed %d\n\n",
		cfg.Tier.Name, design, cfg.HistorySets, cfg.BaselineRuns, 100*cfg.SessionCV, 100*cfg.Drift, metric, cfg.Gates, cfg.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"noise", "rule", "false alarm", "A/A inconclusive"}
	for _, d := range cfg.Deltas {
		head = append(head, fmt.Sprintf("detected +%.0f%%", 100*d), fmt.Sprintf("inconclusive +%.0f%%", 100*d))
	}
	head = append(head, "runs used (pairs when interleaved)")
	for i := 1; i <= cfg.Retests; i++ {
		head = append(head, fmt.Sprintf("FA %d retest%s", i, map[bool]string{true: "", false: "s"}[i == 1]))
	}
	if len(cfg.Sweep) > 0 {
		head = append(head, "min δ 80%", "min δ 95%")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	pct := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	for _, r := range rows {
		cells := []string{r.Model, r.Rule, fmt.Sprintf("%.2f%%", 100*r.FalseAlarm), pct(r.InconclusiveAA)}
		for i := range cfg.Deltas {
			cells = append(cells, pct(r.Detection[i]), pct(r.Inconclusive[i]))
		}
		cells = append(cells, fmt.Sprintf("%.1f", r.MeanRuns))
		for i := 0; i < cfg.Retests; i++ {
			if i < len(r.Retest) {
				cells = append(cells, fmt.Sprintf("%.2f%%", 100*r.Retest[i]))
			} else {
				cells = append(cells, "-")
			}
		}
		if len(cfg.Sweep) > 0 {
			cells = append(cells, pct(r.Min80), pct(r.Min95))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

type simulator struct {
	cfg       SimConfig
	model     NoiseModel
	key       string // result key of the regressed metric
	rng       *rand.Rand
	prompts   []float64 // the gate's prompt set (World.Requests)
	inHistory bool      // drawing the history: its card, its noise
}

type rate struct {
	detected, inconclusive, runs float64
	retest                       []float64
}

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

// simMetrics are typical levels of the latency metrics the tiers use.
var simMetrics = map[string]float64{
	"p99_tpot_ms": 14, "median_tpot_ms": 11, "p99_ttft_ms": 900, "median_ttft_ms": 250,
	"p99_itl_ms": 40, "median_itl_ms": 10, "p99_e2el_ms": 3000, "median_e2el_ms": 1800,
	"mean_ttft_ms": 300, "mean_tpot_ms": 11.5, "mean_itl_ms": 11, "mean_e2el_ms": 1900,
	"p90_ttft_ms": 700, "p90_tpot_ms": 13, "p95_ttft_ms": 800, "p95_tpot_ms": 13.5,
	"p90_itl_ms": 14, "p90_e2el_ms": 2600,
}

// rates simulates gates with a true regression delta and returns, per
// rule, the share called a regression, the share left inconclusive and
// the runs used; for the production rule also the cumulative false-alarm
// share after each of retests retests.
func (s *simulator) rates(delta float64, gates, retests int) ([3]rate, error) {
	var out [3]rate
	out[2].retest = make([]float64, retests)
	tier := s.cfg.Tier
	for g := 0; g < gates; g++ {
		s.newGate()
		hist := s.history()
		ev := s.newEvidence(delta)
		// The seed's rule: one run each, 3% either way.
		b, c := ev.naive()
		if math.Abs(c/b-1) > 0.03 {
			out[0].detected++
		}
		out[0].runs++
		opt := Options{History: hist}
		rep, err := ev.judge(tier, opt)
		if err != nil {
			return out, err
		}
		out[1].runs += float64(ev.size())
		switch rep.Verdict {
		case Regression:
			out[1].detected++
		case Inconclusive:
			out[1].inconclusive++
		}
		if rep.Verdict == Inconclusive && rep.NeedMoreRuns > ev.size() {
			ev.add(rep.NeedMoreRuns - ev.size())
			opt.Looks = rep.Looks
			if rep, err = ev.judge(tier, opt); err != nil {
				return out, err
			}
		}
		out[2].runs += float64(ev.size())
		alarmed := rep.Verdict == Regression
		switch rep.Verdict {
		case Regression:
			out[2].detected++
		case Inconclusive:
			out[2].inconclusive++
		}
		for r := 0; r < retests; r++ {
			if rep.Looks.Final() {
				// The plan's looks are spent: the last verdict stands.
				if alarmed {
					out[2].retest[r]++
				}
				continue
			}
			ev.add(s.cfg.Runs)
			opt.Looks = rep.Looks
			if rep, err = ev.judge(tier, opt); err != nil {
				return out, err
			}
			if rep.Verdict == Regression {
				alarmed = true
			}
			if alarmed {
				out[2].retest[r]++
			}
		}
	}
	for i := range out {
		out[i].detected /= float64(gates)
		out[i].inconclusive /= float64(gates)
		out[i].runs /= float64(gates)
		for r := range out[i].retest {
			out[i].retest[r] /= float64(gates)
		}
	}
	return out, nil
}
