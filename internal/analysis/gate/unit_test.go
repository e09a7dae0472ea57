package gate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// abba uploads base and head runs in the agent's order (B H H B B H …)
// with their positions, and pairs them the way production does.
func abba(t *testing.T, base, head []*result.Result) []Pair {
	t.Helper()
	var sr []SidedRun
	seq := 0
	for i := range base {
		b := SidedRun{Session: "1", Side: SideBase, Pair: i, Result: base[i]}
		h := SidedRun{Session: "1", Side: SideHead, Pair: i, Result: head[i]}
		first, second := &b, &h
		if i%2 == 1 {
			first, second = &h, &b
		}
		first.Seq, second.Seq = seq, seq+1
		seq += 2
		sr = append(sr, *first, *second)
	}
	pairs, notes, err := MakePairs(sr)
	if err != nil || len(notes) > 0 {
		t.Fatalf("pair: %v %v", err, notes)
	}
	return pairs
}

// flat makes n runs of the levels, each times exp(f[i]).
func flat(levels map[string]float64, f []float64) []*result.Result {
	out := make([]*result.Result, len(f))
	for i := range f {
		r := &result.Result{Completed: 1000, Metrics: map[string]float64{}, Perfgate: env()}
		for k, v := range levels {
			r.Metrics[k] = v * math.Exp(f[i])
		}
		out[i] = r
	}
	return out
}

var tpotLevels = map[string]float64{"median_tpot_ms": 11}

// MakePairs numbers engine starts from the runs' positions: a start per
// change of side, so the head runs of pairs 0 and 1 share one.
func TestMakePairsNumbersStarts(t *testing.T) {
	t.Parallel()
	z := make([]float64, 6)
	pairs := abba(t, flat(tpotLevels, z), flat(tpotLevels, z))
	want := [][2]int{{1, 2}, {3, 2}, {3, 4}, {5, 4}, {5, 6}, {7, 6}}
	for i, p := range pairs {
		if [2]int{p.BaseStart, p.HeadStart} != want[i] {
			t.Errorf("pair %d: starts base %d head %d, want %v", i, p.BaseStart, p.HeadStart, want[i])
		}
	}
	// Without distinct positions nothing is known: no starts.
	pairs, _, _ = MakePairs([]SidedRun{{Session: "1", Side: SideBase, Result: flat(tpotLevels, z)[0]}, {Session: "1", Side: SideHead, Result: flat(tpotLevels, z)[0]}})
	if pairs[0].BaseStart != 0 || pairs[0].HeadStart != 0 {
		t.Errorf("no positions: starts %d %d", pairs[0].BaseStart, pairs[0].HeadStart)
	}
}

// The engine start is the unit. Each head start's state is common to its
// two runs; counting those runs as independent pairs is
// pseudo-replication. A/A jobs with a 3% per-start state: treating pairs
// as independent raises false alarms well above the tier's α; the start
// model keeps them at it.
func TestStartIsTheUnit(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	tr.RegressionAt = config.RegressionAtHalf
	rng := rand.New(rand.NewPCG(19, 1))
	const gates = 3000
	var startsFA, pairsFA int
	for range gates {
		b, h := make([]float64, 8), make([]float64, 8)
		// Starts in the agent's order: base 1, head 2 (pairs 0, 1), base 3
		// (pairs 1, 2), head 4 (pairs 2, 3), …
		state := map[int]float64{}
		st := func(n int) float64 {
			if _, ok := state[n]; !ok {
				state[n] = 0.03 * rng.NormFloat64()
			}
			return state[n]
		}
		for i := range 8 {
			b[i] = st(2*((i+1)/2)+1) + 0.01*rng.NormFloat64()
			h[i] = st(2*(i/2)+2) + 0.01*rng.NormFloat64()
		}
		pairs := abba(t, flat(tpotLevels, b), flat(tpotLevels, h))
		rep, err := ComparePaired(pairs, tr, Options{Looks: SingleLook()})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict == Regression {
			startsFA++
		}
		for i := range pairs {
			pairs[i].BaseStart, pairs[i].HeadStart = 0, 0
		}
		if rep, _ := ComparePaired(pairs, tr, Options{Looks: SingleLook()}); rep.Verdict == Regression {
			pairsFA++
		}
	}
	if f := float64(startsFA) / gates; f > 0.008 {
		t.Errorf("start model: false alarms %.2f%% at α 0.5%%", 100*f)
	}
	if f := float64(pairsFA) / gates; f < 0.012 {
		t.Errorf("pairs as independent: false alarms %.2f%%; the case no longer shows pseudo-replication", 100*f)
	}
}

// One whole run 15% slow among 8 pairs is left out and named; a second
// one in the same job stays in (the rule's breakdown is 1 in 8) and widens
// the variance instead.
func TestOutlierPairLeftOut(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	noise := []float64{0.004, -0.003, 0.001, -0.002, 0.003, -0.004, 0.002, -0.001}
	base := flat(tpotLevels, make([]float64, 8))
	head := flat(tpotLevels, noise)
	head[5].Metrics["median_tpot_ms"] *= 1.15
	rep, err := ComparePaired(pairsOf(base, head), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := metric(t, rep, "tpot_median")
	if !strings.Contains(m.Estimator, "outlier pair 5") || m.CandidateRuns != 7 || m.Verdict != MetricSame || math.Abs(m.Estimate) > 0.005 {
		t.Errorf("one +15%% run: %s, %s, estimate %+.3f on %d pairs", m.Verdict, m.Estimator, m.Estimate, m.CandidateRuns)
	}
	head[2].Metrics["median_tpot_ms"] *= 1.15
	rep, _ = ComparePaired(pairsOf(base, head), tr, Options{})
	if m := metric(t, rep, "tpot_median"); m.CandidateRuns != 7 || strings.Count(m.Estimator, "outlier pair") != 1 {
		t.Errorf("two +15%% runs: %d pairs used, %s", m.CandidateRuns, m.Estimator)
	}
}

// The outlier rule's robust SD is the job's own, but never below the
// typical job's of the history: a job whose eight ratios happen to lie
// close together does not make an ordinary pair an outlier, while a whole
// run 15% slow is still left out.
func TestOutlierScaleFromHistory(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	quiet := []float64{0.002, -0.002, 0.001, -0.001, 0.002, -0.002, 0.001, -0.001}
	// Earlier A/A jobs with pair ratios spread about 2%.
	var noisy [][]Pair
	for h := 0; h < 4; h++ {
		f := []float64{0.02, -0.02, 0.015, -0.015, 0.025, -0.025, 0.01, -0.01}
		set := pairsOf(flat(tpotLevels, make([]float64, 8)), flat(tpotLevels, f))
		for i := range set {
			set[i].Session = "h" + string(rune('1'+h))
		}
		noisy = append(noisy, set)
	}
	for _, tc := range []struct {
		name    string
		history [][]Pair
		slow    float64 // pair 5's head, relative
		dropped bool
	}{
		{"no history: +2.5% is 10 of the job's robust SDs", nil, 1.025, true},
		{"a 2% history: +2.5% is an ordinary pair", noisy, 1.025, false},
		{"a 2% history: a run 15% slow is still an outlier", noisy, 1.15, true},
	} {
		head := flat(tpotLevels, quiet)
		head[5].Metrics["median_tpot_ms"] *= tc.slow
		rep, err := ComparePaired(pairsOf(flat(tpotLevels, make([]float64, 8)), head), tr, Options{History: History{Paired: tc.history}})
		if err != nil {
			t.Fatal(err)
		}
		m := metric(t, rep, "tpot_median")
		if got := strings.Contains(m.Estimator, "outlier pair 5"); got != tc.dropped || (m.CandidateRuns == 7) != tc.dropped {
			t.Errorf("%s: dropped %v on %d pairs (%s)", tc.name, got, m.CandidateRuns, m.Estimator)
		}
	}
}

// On clean normal runs (CV 2%, no outliers) the outlier rule leaves a
// pair out of almost no job once the history's typical scale floors the
// job's own: with the job's MAD of 8 ratios alone it did in 6.5% of jobs.
func TestOutlierRuleQuietOnCleanRuns(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	m, _ := config.LookupMetric("tpot_median")
	st := Stresses()[0]
	sc := SimConfig{Tier: merge, Design: DesignInterleaved, Runs: 8, BaselineRuns: 5, HistorySets: 4, SessionCV: 0.02, Drift: 0.002,
		Metric: "tpot_median", World: st.World}
	s := &simulator{cfg: sc, model: st.Model, key: m.Key, rng: rand.New(rand.NewPCG(5, 1))}
	j := &judge{cache: newSeriesCache()}
	const jobs = 1000
	own, floored := 0, 0
	for g := 0; g < jobs; g++ {
		hist := s.history()
		pv, _ := j.pairValues(m, s.newEvidence(0).pairs)
		if _, notes := dropOutlierPairs(pv, 0); len(notes) > 0 {
			own++
		}
		if _, notes := dropOutlierPairs(pv, j.pairScale(m, hist.Paired)); len(notes) > 0 {
			floored++
		}
	}
	t.Logf("clean jobs with a pair left out: %d of %d on the job's scale, %d with the history's floor", own, jobs, floored)
	if own < jobs*3/100 || floored > jobs*15/1000 {
		t.Errorf("clean jobs with a pair left out: %d of %d on the job's scale, %d with the history's floor", own, jobs, floored)
	}
}

// A run without the metric (or with a zero) drops its pair, not the
// metric; the stored comparison drops the run.
func TestMissingRunDropsTheRun(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	base, head := runs(tpotLevels, 0.005, 0), runs(tpotLevels, 0.005, 0)
	head = append(head, runs(tpotLevels, 0.005, 0)[:3]...)
	base = append(base, runs(tpotLevels, 0.005, 0)[:3]...)
	head[3].Metrics["median_tpot_ms"] = 0
	rep, err := ComparePaired(pairsOf(base, head), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := metric(t, rep, "tpot_median"); m.Note != "" || m.CandidateRuns != 7 || !strings.Contains(m.Estimator, "1 pair(s) without a value left out") || rep.Verdict != Pass {
		t.Errorf("paired, one zero: %s %q %q on %d pairs", rep.Verdict, m.Note, m.Estimator, m.CandidateRuns)
	}
	delete(head[3].Metrics, "median_tpot_ms")
	rep = compare(t, runs(tpotLevels, 0.005, 0), head[:5], tr, Options{})
	if m := metric(t, rep, "tpot_median"); m.Note != "" || m.CandidateRuns != 4 || !strings.Contains(m.Estimator, "1 run(s) without a value left out") {
		t.Errorf("stored, one missing: %q %q on %d runs", m.Note, m.Estimator, m.CandidateRuns)
	}
}

// History from another card does not speak for this one's noise: it is
// left out and the check says so.
func TestHistoryFromAnotherCardLeftOut(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	wide := []float64{0.3, -0.3, 0.2, -0.2, 0.1}
	card := func(hist []*result.Result, name string) []Pair {
		base := flat(tpotLevels, make([]float64, len(hist)))
		for i := range hist {
			hist[i].Perfgate.Environment.GPUName, base[i].Perfgate.Environment.GPUName = name, name
		}
		return pairsOf(base, hist)
	}
	other, same := card(flat(tpotLevels, wide), "NVIDIA A10G"), card(flat(tpotLevels, wide), env().Environment.GPUName)
	b, h := runs(tpotLevels, 0.01, 0), runs(tpotLevels, 0.01, 0)
	for _, tc := range []struct {
		name   string
		hist   []Pair
		kept   int
		widens bool
	}{{"another card", other, 0, false}, {"this card", same, 1, true}} {
		rep, err := ComparePaired(pairsOf(b, h), tr, Options{History: History{Paired: [][]Pair{tc.hist}}})
		if err != nil {
			t.Fatal(err)
		}
		m := metric(t, rep, "tpot_median")
		if rep.HistorySessions != tc.kept || strings.Contains(m.Estimator, "widened") != tc.widens ||
			strings.Contains(strings.Join(rep.Notes, " "), "another card") == (tc.kept == 1) {
			t.Errorf("%s: %d history sets, %q, notes %q", tc.name, rep.HistorySessions, m.Estimator, rep.Notes)
		}
	}
}

// The last look the budget pays for spends what is left of α, and passes
// an estimate below the regression line when the evidence is precise
// enough; before it, the same evidence stays inconclusive; under
// regression_at: threshold only the equivalence test passes.
func TestLastLookDecides(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 0, "tpot_median")
	tr.RegressionAt = config.RegressionAtHalf
	// 2.4% slower with 7% pair noise over 16 pairs: below the +2.5% line,
	// yet the equivalence test's upper bound is past 5% at every look.
	noise := make([]float64, 16)
	for i := range noise {
		noise[i] = 0.0658 * float64(1-2*(i%2))
	}
	head := flat(tpotLevels, noise)
	for _, r := range head {
		r.Metrics["median_tpot_ms"] *= 1.024
	}
	pairs := pairsOf(flat(tpotLevels, make([]float64, 16)), head)
	first, err := ComparePaired(pairs, tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Verdict != Inconclusive || first.NeedMoreRuns != 32 {
		t.Fatalf("first look: %s, need %d", first.Verdict, first.NeedMoreRuns)
	}
	last, err := ComparePaired(pairs, tr, Options{Looks: first.Looks, LastLook: true})
	if err != nil {
		t.Fatal(err)
	}
	m := metric(t, last, "tpot_median")
	if last.Verdict != Pass || !last.Looks.Final() || !near(last.Alpha, 0.005-first.Alpha) || !near(last.Looks.SpentAlpha(), 0.005) || m.Decided == "" {
		t.Errorf("last look: %s (%s), α %g of which spent %g, final %v", last.Verdict, m.Decided, last.Alpha, last.Looks.SpentAlpha(), last.Looks.Final())
	}
	tr.RegressionAt = config.RegressionAtThreshold
	if rep, _ := ComparePaired(pairs, tr, Options{Looks: first.Looks, LastLook: true}); rep.Verdict != Inconclusive || rep.NeedMoreRuns != 0 {
		t.Errorf("threshold rule, last look: %s need %d", rep.Verdict, rep.NeedMoreRuns)
	}
}

// A runner busy while it measured (the client's own check, below
// client-bound) is named on the check.
func TestContendedRunnerNoted(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	b, h := runs(tpotLevels, 0.01, 0), runs(tpotLevels, 0.01, 0)
	for i, r := range h {
		r.Perfgate.Client = &result.ClientCheck{CPUUtilization: 0.2, Cores: 4}
		if i < 2 {
			r.Perfgate.Client.CPUUtilization, r.Perfgate.Client.ScheduleLagP99MS = 0.7, 80
		}
	}
	rep, err := ComparePaired(pairsOf(b, h), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Join(rep.Notes, " "); !strings.Contains(n, "contended in 2 of 10 runs") || !strings.Contains(n, "70% of its cores") {
		t.Errorf("notes %q", rep.Notes)
	}
	if rep := compare(t, b, runs(tpotLevels, 0.01, 0), tr, Options{}); strings.Contains(strings.Join(rep.Notes, " "), "contended") {
		t.Errorf("an idle runner noted as contended: %q", rep.Notes)
	}
}

// The stored comparison keeps only history from the baseline's setup too.
func TestStoredHistoryFromAnotherCardLeftOut(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_median")
	other := runs(tpotLevels, 0.2, 0)
	for _, r := range other {
		r.Perfgate.Environment.GPUName = "NVIDIA A10G"
	}
	hist := History{Sessions: []Session{{Label: "a10g", Runs: other}, {Label: "h100", Runs: runs(tpotLevels, 0.01, 0)}}}
	rep := compare(t, runs(tpotLevels, 0.01, 0), runs(tpotLevels, 0.01, 0), tr, Options{History: hist})
	if rep.HistorySessions != 1 || !strings.Contains(strings.Join(rep.Notes, " "), "1 history set(s) left out") {
		t.Errorf("%d history sessions, notes %q", rep.HistorySessions, rep.Notes)
	}
}
