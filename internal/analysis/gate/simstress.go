package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Stress is one hard world for the gate: a noise model, what the runner
// adds to it, and optionally a different gated metric.
type Stress struct {
	Name  string
	Model NoiseModel
	World World
	// Gate, when set, replaces the tier's gated latency metric DefaultSim
	// Metric's series is gated on (e.g. tpot_p90 instead of tpot_median)
	// and is where regressions are injected.
	Gate string
	// Drift, when > 0, replaces the run's drift per run (a slow walk).
	Drift float64
}

// Stresses are the worlds `perfgate simulate-gate --stress all` runs,
// each a way the gate's promises broke on a real runner (issue 19).
func Stresses() []Stress {
	n := func(cv float64) NoiseModel { return NoiseModel{Name: fmt.Sprintf("normal, CV %.0f%%", 100*cv), CV: cv} }
	return []Stress{
		{Name: "model: CV 2%", Model: n(0.02)},
		{Name: "per-start state 2%", Model: n(0.02), World: World{StartCV: 0.02}},
		{Name: "per-start state 3%", Model: n(0.02), World: World{StartCV: 0.03}},
		{Name: "per-start 3%, restart per run", Model: n(0.02), World: World{StartCV: 0.03, RestartPerRun: true}},
		{Name: "job CV 3%, history 2%", Model: n(0.03), World: World{HistoryCV: 0.02}},
		{Name: "job CV 4%, history 2%", Model: n(0.04), World: World{HistoryCV: 0.02}},
		{Name: "history from another card (CV 0.5%)", Model: n(0.03), World: World{HistoryCV: 0.005, HistoryCard: "other-card"}},
		{Name: "head-only variance +3.5%", Model: n(0.02), World: World{HeadCV: 0.035}},
		{Name: "one +15% outlier run per job", Model: n(0.02), World: World{OutlierRuns: 1, OutlierSize: math.Log(1.15)}},
		{Name: "t(5) tails + 3% outlier runs", Model: DefaultNoiseModels[2]},
		{Name: "100 requests, tpot_p90 gated", Model: n(0.01), World: World{Requests: 100}, Gate: "tpot_p90"},
		{Name: "100 requests, tpot_median gated", Model: n(0.01), World: World{Requests: 100}, Gate: "tpot_median"},
		{Name: "one missing run per job", Model: n(0.02), World: World{MissingRuns: 1}},
		// Harder than any above (issue 34): a noisy shared machine.
		{Name: "per-start SD 5%, within-start CV 3%, drift 0.5%/run", Model: n(0.03), World: World{StartCV: 0.05}, Drift: 0.005},
		{Name: "t(3) tails + 3% outlier runs ×1.6", Model: NoiseModel{Name: "t(3), CV 3%", CV: 0.03, TailDF: 3, OutlierProb: 0.03, OutlierShift: math.Log(1.6) / 0.03}},
		{Name: "all of the above", Model: NoiseModel{Name: "t(3), CV 3%", CV: 0.03, TailDF: 3, OutlierProb: 0.03, OutlierShift: math.Log(1.6) / 0.03}, World: World{StartCV: 0.05}, Drift: 0.005},
	}
}

// NoiseProfile is measured noise to simulate with: run-to-run CVs per
// config metric (e.g. from A/A runs of a real engine), the engine-start
// and session CVs. It reads from JSON:
//
//	{"name": "ollama-cpu", "cv": {"tpot_median": 0.012, "ttft_p90": 0.04,
//	 "output_throughput": 0.011}, "start_cv": 0.01, "session_cv": 0.02}
type NoiseProfile struct {
	Name      string             `json:"name"`
	CV        map[string]float64 `json:"cv"`
	StartCV   float64            `json:"start_cv"`
	SessionCV float64            `json:"session_cv"`
}

// LoadNoiseProfile reads and checks a noise profile.
func LoadNoiseProfile(path string) (NoiseProfile, error) {
	var p NoiseProfile
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("noise profile: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("noise profile %s: %w", path, err)
	}
	if len(p.CV) == 0 {
		return p, fmt.Errorf("noise profile %s: no \"cv\" per metric", path)
	}
	for name, cv := range p.CV {
		if _, ok := config.LookupMetric(name); !ok {
			return p, fmt.Errorf("noise profile %s: unknown metric %q", path, name)
		}
		if !(cv > 0 && cv < 1) {
			return p, fmt.Errorf("noise profile %s: CV of %s is %g: want a fraction in (0, 1), e.g. 0.02", path, name, cv)
		}
	}
	if p.StartCV < 0 || p.StartCV >= 1 || p.SessionCV < 0 || p.SessionCV >= 1 {
		return p, fmt.Errorf("noise profile %s: start_cv and session_cv are fractions in [0, 1)", path)
	}
	if p.Name == "" {
		p.Name = path
	}
	return p, nil
}

// Stress is the profile as a stress: every metric it lists at its CV,
// the others at the largest listed.
func (p NoiseProfile) Stress() Stress {
	cvs := map[string]float64{}
	top := 0.0
	for name, cv := range p.CV {
		m, _ := config.LookupMetric(name)
		cvs[m.Key] = cv
		top = math.Max(top, cv)
	}
	return Stress{Name: "profile: " + p.Name, Model: NoiseModel{Name: p.Name, CV: top},
		World: World{CVs: cvs, StartCV: p.StartCV}}
}

// StressConfig runs every stress the way the merge tier gates a PR: the
// first job, then more pairs while inconclusive, within the tier's
// settle budget of GPU-minutes and its plan of looks.
type StressConfig struct {
	Tier        config.Tier
	Gates       int // A/A gates per stress
	DeltaGates  int // gates per stress and regression
	Deltas      []float64
	HistorySets int
	SessionCV   float64 // overridden by a profile's session_cv when set
	Drift       float64
	// RunMinutes and StartMinutes price a measured run and an engine
	// start (with its warm-up) in GPU-minutes.
	RunMinutes, StartMinutes float64
	Seed                     uint64
	Stresses                 []Stress
	Profile                  *NoiseProfile
	// Plan is the PRs' spending plan (PlanPocock, PlanOBrienFleming);
	// "" is the default, Pocock.
	Plan string
}

// StressRow is one stress's figures.
type StressRow struct {
	Stress string
	// FalseAlarm is the share of A/A PRs called a regression at any look;
	// Human the share left inconclusive when the budget or the plan ran
	// out (a maintainer decides).
	FalseAlarm, Human float64
	Detection         []float64 // per delta: called a regression
	GPUMinutes        float64   // mean per A/A PR
	GPUMinutesAt      []float64 // mean per PR with a regression, per delta
	Looks             float64   // mean looks per A/A PR
	FirstFA           float64   // A/A called a regression at the first look
	// Detectable is the mean smallest change (worse, relative) the gated
	// metric's evidence could call at the first look of an A/A PR, with
	// 90% power (gate.MetricResult.Detectable): what the noise lets the
	// first job resolve.
	Detectable float64
	// Refs are the reference tests on the same runs (RefOracle, RefREML,
	// RefOnce), calibrated on the stress's A/A PRs to the tier's α.
	Refs [nRefs]RefRates
	// OnceAtLook is, per delta, the share of PRs the gate's own t on its
	// final runs calls worse at the level of the gate's last look (its α
	// over the gated metrics, Holm's first step): between RefOnce (at α)
	// and the gate, it splits the gap into what the looks and Holm cost
	// and what the regression line, the noise band and the history's
	// widening cost.
	OnceAtLook []float64
}

// SimulateStress measures the gate under every stress.
func SimulateStress(cfg StressConfig) ([]StressRow, error) {
	stresses := cfg.Stresses
	if cfg.Profile != nil {
		stresses = append(append([]Stress(nil), stresses...), cfg.Profile.Stress())
	}
	if cfg.Gates < 1 || cfg.DeltaGates < 1 {
		return nil, fmt.Errorf("simulate: need gates ≥ 1")
	}
	// Each stress draws from its own seeded generator, so running them in
	// parallel gives the same table as running them in turn.
	rows := make([]StressRow, len(stresses))
	errs := make([]error, len(stresses))
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 4))
	var wg sync.WaitGroup
	for si, st := range stresses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[si], errs[si] = stressRow(cfg, si, st, len(stresses))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// stressRow measures one stress (the si-th of n).
func stressRow(cfg StressConfig, si int, st Stress, n int) (StressRow, error) {
	tier := cfg.Tier
	tier.Secondary = nil
	metric := DefaultSimMetric
	if g, ok := gatedSeries(tier, "tpot"); ok {
		metric = g
	}
	if st.Gate != "" {
		tier.Metrics = replaceSeries(tier.Metrics, "tpot", st.Gate)
		metric = st.Gate
	}
	m, ok := config.LookupMetric(metric)
	if !ok {
		return StressRow{}, fmt.Errorf("simulate: unknown metric %q", metric)
	}
	sessionCV := cfg.SessionCV
	if cfg.Profile != nil && si == n-1 && cfg.Profile.SessionCV > 0 {
		sessionCV = cfg.Profile.SessionCV
	}
	drift := cfg.Drift
	if st.Drift > 0 {
		drift = st.Drift
	}
	sc := SimConfig{Tier: tier, Design: DesignInterleaved, Runs: max(tier.Pairs, MinPairs), BaselineRuns: 5, HistorySets: cfg.HistorySets,
		SessionCV: sessionCV, Drift: drift, Metric: metric, World: st.World}
	if !tier.Interleave {
		sc.Design, sc.Runs = DesignStored, max(tier.Repeats, MinRuns)
	}
	s := &simulator{cfg: sc, model: st.Model, key: m.Key, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(si)+1))}
	row := StressRow{Stress: st.Name}
	null, err := s.settle(0, cfg.Gates, cfg)
	if err != nil {
		return row, fmt.Errorf("stress %s: %w", st.Name, err)
	}
	row.FalseAlarm, row.Human, row.GPUMinutes, row.Looks, row.FirstFA, row.Detectable = null.regression, null.human, null.gpu, null.looks, null.first, null.detectable
	alt := make([][nRefs][]float64, 0, len(cfg.Deltas))
	for _, d := range cfg.Deltas {
		a, err := s.settle(d, cfg.DeltaGates, cfg)
		if err != nil {
			return row, fmt.Errorf("stress %s: %w", st.Name, err)
		}
		row.Detection = append(row.Detection, a.regression)
		row.GPUMinutesAt = append(row.GPUMinutesAt, a.gpu)
		alt = append(alt, a.refs())
		row.OnceAtLook = append(row.OnceAtLook, a.onceAtLook())
	}
	nullRefs := null.refs()
	for k := range row.Refs {
		per := make([][]float64, len(alt))
		for i := range alt {
			per[i] = alt[i][k]
		}
		row.Refs[k] = calibrate(tierAlpha(tier), nullRefs[k], per)
	}
	return row, nil
}

// planName is the spending plan's name, the default's when unset.
func planName(p string) string {
	if p == "" {
		return PlanPocock
	}
	return p
}

// tierAlpha is the tier's one-sided family-wise α: what its plan of
// looks spends in all.
func tierAlpha(t config.Tier) float64 {
	if t.Confidence > 0 {
		return 1 - t.Confidence
	}
	return 1 - DefaultConfidence
}

type settled struct {
	regression, human, gpu, looks, first, detectable float64
	ref                                              []refPs   // per PR: the reference tests' p-values on its final runs
	level                                            []float64 // per PR: the level its last look tested the smallest p at
}

// holmFirstLevel is the level the report's last look tested its smallest
// gated p-value at: the look's α over the gated metrics measured (Holm's
// first step).
func holmFirstLevel(rep *Report) float64 {
	k := 0
	for _, m := range rep.Metrics {
		if !m.Secondary && m.Measured() {
			k++
		}
	}
	return rep.Alpha / float64(max(k, 1))
}

// onceAtLook is the share of PRs whose final runs the gate's own t calls
// worse at the level the gate's last look used: what the looks and Holm
// leave of α, without the line, the band and the history's widening.
func (s settled) onceAtLook() float64 {
	c, n := 0, 0
	for i, r := range s.ref {
		if math.IsNaN(r[RefOnce]) {
			continue
		}
		n++
		if r[RefOnce] <= s.level[i] {
			c++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(c) / float64(n)
}

// refs are the PRs' p-values per reference test.
func (s settled) refs() [nRefs][]float64 {
	var out [nRefs][]float64
	for _, r := range s.ref {
		for k, p := range r {
			out[k] = append(out[k], p)
		}
	}
	return out
}

// settle gates PRs with a true change delta the way production does:
// judge the first job; while inconclusive, add the pairs the report asks
// for if they fit the settle budget and the plan has looks left.
func (s *simulator) settle(delta float64, gates int, cfg StressConfig) (settled, error) {
	var out settled
	tier := s.cfg.Tier
	for g := 0; g < gates; g++ {
		s.newGate()
		hist := s.history()
		ev := s.newEvidence(delta)
		first := ev.cost(cfg)
		// A look is the last when the doubling after it would not fit.
		last := func() bool {
			return ev.cost(cfg)-first+ev.priceOf(ev.size(), cfg) > float64(tier.SettleGPUMinutes)
		}
		opt := Options{History: hist, LastLook: last(), Looks: Looks{Plan: cfg.Plan}}
		rep, err := ev.judge(tier, opt)
		if err != nil {
			return out, err
		}
		looks := 1
		if rep.Verdict == Regression {
			out.first++
		}
		for _, m := range rep.Metrics {
			if m.Metric == s.cfg.Metric && m.Measured() {
				out.detectable += math.Abs(m.Detectable)
			}
		}
		for rep.Verdict == Inconclusive && rep.NeedMoreRuns > ev.size() && !rep.Looks.Final() {
			more := rep.NeedMoreRuns - ev.size()
			if ev.cost(cfg)-first+ev.priceOf(more, cfg) > float64(tier.SettleGPUMinutes) {
				break
			}
			ev.add(more)
			opt.Looks, opt.LastLook = rep.Looks, last()
			if rep, err = ev.judge(tier, opt); err != nil {
				return out, err
			}
			looks++
		}
		switch rep.Verdict {
		case Regression:
			out.regression++
		case Inconclusive:
			out.human++
		}
		out.gpu += ev.cost(cfg)
		out.looks += float64(looks)
		out.ref = append(out.ref, s.reference(ev, hist))
		out.level = append(out.level, holmFirstLevel(rep))
	}
	n := float64(gates)
	return settled{regression: out.regression / n, human: out.human / n, gpu: out.gpu / n, looks: out.looks / n,
		first: out.first / n, detectable: out.detectable / n, ref: out.ref, level: out.level}, nil
}

// cost is the GPU-minutes the PR's jobs spent so far.
func (ev *evidence) cost(cfg StressConfig) float64 {
	return float64(ev.runs)*cfg.RunMinutes + float64(ev.starts)*cfg.StartMinutes
}

// priceOf is what a job of n more pairs (runs) costs.
func (ev *evidence) priceOf(n int, cfg StressConfig) float64 {
	if ev.s.cfg.Design == DesignStored {
		starts := 1
		if ev.s.cfg.World.RestartPerRun {
			starts = n
		}
		return float64(n)*cfg.RunMinutes + float64(starts)*cfg.StartMinutes
	}
	starts := n + 1
	if ev.s.cfg.World.RestartPerRun {
		starts = 2 * n
	}
	return float64(2*n)*cfg.RunMinutes + float64(starts)*cfg.StartMinutes
}

// gatedSeries is the tier's gated metric on a latency series, if any.
func gatedSeries(t config.Tier, series string) (string, bool) {
	names := make([]string, 0, len(t.Metrics))
	for n := range t.Metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if m, ok := config.LookupMetric(n); ok && m.Series == series {
			return n, true
		}
	}
	return "", false
}

// replaceSeries gates metric instead of the tier's metric on its series,
// at the same threshold.
func replaceSeries(ms map[string]config.Threshold, series, metric string) map[string]config.Threshold {
	out := map[string]config.Threshold{}
	th := config.Threshold{Limit: 0.05, Direction: config.HigherIsWorse}
	for n, t := range ms {
		if m, ok := config.LookupMetric(n); ok && m.Series == series {
			th = t
			continue
		}
		out[n] = t
	}
	out[metric] = th
	return out
}

// refDelta is the index of the regression the reference columns show:
// the one nearest the merge threshold of 5%; -1 when there is none.
func refDelta(ds []float64) int {
	best := -1
	for i, d := range ds {
		if best < 0 || math.Abs(d-0.05) < math.Abs(ds[best]-0.05) {
			best = i
		}
	}
	return best
}

// WriteStressTable prints one row per stress, with the targets.
func WriteStressTable(w io.Writer, cfg StressConfig, rows []StressRow) error {
	design := fmt.Sprintf("interleaved, %d pairs per job (ABBA)", cfg.Tier.Pairs)
	if !cfg.Tier.Interleave {
		design = fmt.Sprintf("stored baseline, %d runs per job", cfg.Tier.Repeats)
	}
	fmt.Fprintf(w, "tier %s, %s; settle budget %d GPU-min beyond the first job, plan of %d looks (%s); history %d earlier jobs; session shift %.1f%%, drift %.2f%%/run; %.2g GPU-min per run, %.2g per engine start; %d A/A and %d gates per Δ, seed %d\n",
		cfg.Tier.Name, design, cfg.Tier.SettleGPUMinutes, DefaultMaxLooks, planName(cfg.Plan), cfg.HistorySets, 100*cfg.SessionCV, 100*cfg.Drift, cfg.RunMinutes, cfg.StartMinutes, cfg.Gates, cfg.DeltaGates, cfg.Seed)
	fmt.Fprintf(w, "targets: false alarm ≤ 0.5%%, clean PRs needing a human ≤ 2%%, +5%% detected ≥ 90%%\n")
	if cfg.Tier.Interleave {
		fmt.Fprintf(w, "reference tests on each PR's final runs, calibrated on the stress's A/A PRs to α = %.2g (their share of A/A PRs under their own α in the last column): the mixed model over engine starts and pairs with REML variances (best), with the true variances (limit), and the gate's own t once at α\n", tierAlpha(cfg.Tier))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"stress", "false alarm", "clean → human", "detectable (1st look)"}
	for _, d := range cfg.Deltas {
		head = append(head, fmt.Sprintf("+%.0f%% caught", 100*d))
	}
	ri := refDelta(cfg.Deltas)
	if ri >= 0 {
		at := fmt.Sprintf("+%.0f%%", 100*cfg.Deltas[ri])
		head = append(head, "best "+at+" (REML)", "limit "+at+" (oracle)", "gate's t once "+at, "… at last look's α/k", "gap to best", "A/A at α: REML, oracle")
	}
	head = append(head, "GPU-min A/A", "looks A/A")
	for _, d := range cfg.Deltas {
		head = append(head, fmt.Sprintf("GPU-min +%.0f%%", 100*d))
	}
	head = append(head, "missed targets")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		cells := []string{r.Stress, fmt.Sprintf("%.2f%%", 100*r.FalseAlarm), fmt.Sprintf("%.2f%%", 100*r.Human), fmt.Sprintf("%.1f%%", 100*r.Detectable)}
		for _, d := range r.Detection {
			cells = append(cells, fmt.Sprintf("%.1f%%", 100*d))
		}
		if ri >= 0 {
			gap := "-"
			if b := r.Refs[RefREML]; b.ok {
				gap = fmt.Sprintf("%+.1f", 100*(b.Detection[ri]-r.Detection[ri]))
			}
			aa := func(x RefRates) string {
				if !x.ok {
					return "-"
				}
				return fmt.Sprintf("%.2f%%", 100*x.NominalAA)
			}
			atLook := "-"
			if ri < len(r.OnceAtLook) && !math.IsNaN(r.OnceAtLook[ri]) {
				atLook = fmt.Sprintf("%.1f%%", 100*r.OnceAtLook[ri])
			}
			cells = append(cells, refLabel(r.Refs[RefREML], ri), refLabel(r.Refs[RefOracle], ri), refLabel(r.Refs[RefOnce], ri), atLook, gap,
				aa(r.Refs[RefREML])+", "+aa(r.Refs[RefOracle]))
		}
		cells = append(cells, fmt.Sprintf("%.0f", r.GPUMinutes), fmt.Sprintf("%.2f", r.Looks))
		for _, g := range r.GPUMinutesAt {
			cells = append(cells, fmt.Sprintf("%.0f", g))
		}
		var missed []string
		if r.FalseAlarm > 0.005 {
			missed = append(missed, "FA")
		}
		if r.Human > 0.02 {
			missed = append(missed, "human")
		}
		for i, d := range cfg.Deltas {
			if math.Abs(d-0.05) < 1e-9 && r.Detection[i] < 0.90 {
				missed = append(missed, "+5%")
			}
		}
		if len(missed) == 0 {
			missed = []string{"-"}
		}
		cells = append(cells, strings.Join(missed, ","))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
