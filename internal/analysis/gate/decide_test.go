package gate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// An all-zero error rate (no failed request on either side) has no
// difference and no spread: p = 1 on both sides, not 0/0, so Holm is
// not poisoned and the report marshals. Before the fix the merge tier's
// JSON failed "unsupported value: NaN".
func TestZeroSpreadIsNoEvidence(t *testing.T) {
	t.Parallel()
	levels := map[string]float64{"p99_tpot_ms": 14, "output_throughput": 5000}
	tr := tier(0.05, 3, "tpot_p99", "output_throughput", "error_rate")
	tr.Metrics["error_rate"] = config.Threshold{Limit: 0.01, Direction: config.HigherIsWorse}
	b, c := runs(levels, 0.01, 0), runs(levels, 0.01, math.Log(1.2), "p99_tpot_ms")
	rep := compare(t, b, c, tr, Options{})
	er := metric(t, rep, "error_rate")
	if er.P != 1 || er.HolmP != 1 || er.Verdict != MetricSame {
		t.Errorf("error_rate 0 vs 0: p %v holm %v verdict %s; want 1, 1, ~", er.P, er.HolmP, er.Verdict)
	}
	if m := metric(t, rep, "tpot_p99"); m.Verdict != MetricRegression || math.IsNaN(m.HolmP) {
		t.Errorf("tpot_p99 +20%% beside a zero error rate: %s, holm p %v", m.Verdict, m.HolmP)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("marshal: %v", err)
	}
	// A difference with no spread is certain, not NaN.
	if w, b := oneSided(0.01, 0, 8); w != 0 || b != 1 {
		t.Errorf("oneSided(0.01, 0) = %v, %v", w, b)
	}
	if w, b := oneSided(math.NaN(), 0.01, 8); w != 1 || b != 1 {
		t.Errorf("oneSided(NaN) = %v, %v", w, b)
	}
}

// A report with a NaN in it is an error, never an unmarshalable verdict.
func TestReportCheckFinite(t *testing.T) {
	t.Parallel()
	rep := &Report{Tier: "merge", Confidence: 0.995, Alpha: 0.0025, Looks: Looks{Alpha: 0.005, Share: 0.5},
		Metrics: []MetricResult{{Metric: "error_rate", P: math.NaN()}}}
	if err := rep.checkFinite(); err == nil || !strings.Contains(err.Error(), "error_rate has a non-finite p") {
		t.Errorf("checkFinite = %v", err)
	}
	rep.Metrics[0].P = 1
	if err := rep.checkFinite(); err != nil {
		t.Errorf("finite report refused: %v", err)
	}
}

// Thresholds mean what they print: "−5%" on a throughput fires at a 5.0%
// drop, not at 4.76% (log1p(0.05) in log space was a 4.88% drop).
func TestThresholdsMeanWhatTheyPrint(t *testing.T) {
	t.Parallel()
	levels := map[string]float64{"output_throughput": 5000}
	tr := tier(0.05, 0, "output_throughput")
	for _, tc := range []struct {
		ratio      float64
		regression bool
	}{{0.951, false}, {0.949, true}} {
		rep := compare(t, runs(levels, 0.0005, 0), runs(levels, 0.0005, math.Log(tc.ratio), "output_throughput"), tr, Options{})
		if (rep.Verdict == Regression) != tc.regression {
			t.Errorf("throughput ×%.3f against −5%%: %s (%+v)", tc.ratio, rep.Verdict, rep.Metrics)
		}
	}
	lat := map[string]float64{"p99_tpot_ms": 14}
	tr = tier(0.05, 0, "tpot_p99")
	for _, tc := range []struct {
		ratio      float64
		regression bool
	}{{1.049, false}, {1.051, true}} {
		rep := compare(t, runs(lat, 0.0005, 0), runs(lat, 0.0005, math.Log(tc.ratio), "p99_tpot_ms"), tr, Options{})
		if (rep.Verdict == Regression) != tc.regression {
			t.Errorf("tpot ×%.3f against +5%%: %s", tc.ratio, rep.Verdict)
		}
	}
}

// The interval shown is the test's: its better-side bound excludes no
// change exactly when the Holm-adjusted p is within α, and its worse-side
// bound is inside the threshold exactly when the metric passes.
func TestIntervalIsTheTests(t *testing.T) {
	t.Parallel()
	lat := map[string]float64{"p99_tpot_ms": 14}
	for _, shift := range []float64{0, 0.01, 0.02, 0.03, 0.06, 0.1} {
		rep := compare(t, runs(lat, 0.02, 0), runs(lat, 0.02, math.Log1p(shift), "p99_tpot_ms"), tier(0.05, 0, "tpot_p99"), Options{})
		m := metric(t, rep, "tpot_p99")
		if sig := m.HolmP <= rep.Alpha; sig != (m.CILow > 0) {
			t.Errorf("shift %.2f: holm p %.5f (α %.4f) but interval [%.4f, %.4f]", shift, m.HolmP, rep.Alpha, m.CILow, m.CIHigh)
		}
		if pass := m.Verdict == MetricPass || m.Verdict == MetricSame; pass != (m.CIHigh < 0.05) {
			t.Errorf("shift %.2f: verdict %s but upper bound %.4f vs threshold 5%%", shift, m.Verdict, m.CIHigh)
		}
		if m.CILow > m.Estimate || m.Estimate > m.CIHigh {
			t.Errorf("shift %.2f: estimate %.4f outside [%.4f, %.4f]", shift, m.Estimate, m.CILow, m.CIHigh)
		}
	}
}

// The per-request samples no longer put a floor under the run-to-run
// variance: a run's statistic's sampling error is already in the spread
// of the runs, and every run replays the same prompts, so requests are not
// independent draws. The same run values decide the same way with or
// without per-request arrays.
func TestNoRequestBootstrapFloor(t *testing.T) {
	t.Parallel()
	lat := map[string]float64{"p99_tpot_ms": 14}
	b, c := runs(lat, 0.003, 0), runs(lat, 0.003, math.Log(1.04), "p99_tpot_ms")
	plain := metric(t, compare(t, b, c, tier(0.02, 0, "tpot_p99"), Options{}), "tpot_p99")
	for i, r := range append(b, c...) {
		// Wide per-request TPOTs: a bootstrap floor would swamp the 0.3% run spread.
		r.Perfgate.TPOTs = make([]float64, 200)
		for q := range r.Perfgate.TPOTs {
			r.Perfgate.TPOTs[q] = 14 * math.Exp(0.5*math.Sin(float64(q*7+i)))
		}
	}
	with := metric(t, compare(t, b, c, tier(0.02, 0, "tpot_p99"), Options{}), "tpot_p99")
	if with.P != plain.P || with.Verdict != MetricRegression {
		t.Errorf("with per-request arrays p %.3g verdict %s; without %.3g %s", with.P, with.Verdict, plain.P, plain.Verdict)
	}
}

// Session variance: a stored baseline and today's runs come from two
// sessions. When the history's sessions scatter by 3% around each other,
// a 4% shift between two tight run sets is a session shift, not a
// regression; with sessions that agree, the same shift is real.
func TestSessionVariance(t *testing.T) {
	t.Parallel()
	lat := map[string]float64{"p99_tpot_ms": 14}
	b, c := runs(lat, 0.004, 0), runs(lat, 0.004, math.Log(1.04), "p99_tpot_ms")
	tr := tier(0.02, 0, "tpot_p99")
	session := func(shift float64) Session { return Session{Runs: runs(lat, 0.004, shift, "p99_tpot_ms")} }
	scattered := History{Sessions: []Session{session(0.03), session(-0.03), session(0.035), session(-0.025), session(0.0), session(0.04)}}
	agreeing := History{Sessions: []Session{session(0.001), session(-0.001), session(0.0), session(0.002), session(-0.002), session(0.001)}}
	rep := compare(t, b, c, tr, Options{History: scattered})
	if m := metric(t, rep, "tpot_p99"); m.Verdict == MetricRegression || m.SessionSD < 0.02 {
		t.Errorf("3%% session scatter: %s, session sd %.4f", m.Verdict, m.SessionSD)
	}
	rep = compare(t, b, c, tr, Options{History: agreeing})
	if m := metric(t, rep, "tpot_p99"); m.Verdict != MetricRegression || m.SessionSD > 0.005 {
		t.Errorf("agreeing sessions: %s, session sd %.4f", m.Verdict, m.SessionSD)
	}
	// No history: the tier's session_noise is the assumption.
	tr.SessionNoise = 0.03
	if m := metric(t, compare(t, b, c, tr, Options{}), "tpot_p99"); m.Verdict == MetricRegression || math.Abs(m.SessionSD-0.03) > 1e-9 {
		t.Errorf("session_noise 3%%: %s, session sd %.4f", m.Verdict, m.SessionSD)
	}
}

// Runs added by a retest come from a new session: the candidate's mean
// averages two session shifts, and the standard error says so.
func TestCandidateSessions(t *testing.T) {
	t.Parallel()
	lat := map[string]float64{"p99_tpot_ms": 14}
	b := runs(lat, 0.01, 0)
	c := append(runs(lat, 0.01, 0.01, "p99_tpot_ms"), runs(lat, 0.01, 0.01, "p99_tpot_ms")...)
	tr := tier(0.05, 3, "tpot_p99")
	tr.SessionNoise = 0.02
	one := compare(t, b, c, tr, Options{})
	sessions := []string{"1", "1", "1", "1", "1", "2", "2", "2", "2", "2"}
	two := compare(t, b, c, tr, Options{CandidateSessions: sessions})
	if two.CandidateSessions != 2 || one.CandidateSessions != 1 {
		t.Errorf("sessions: %d, %d", one.CandidateSessions, two.CandidateSessions)
	}
	// 1 + Σw² is 2 for one session, 1.5 for two halves.
	m1, m2 := metric(t, one, "tpot_p99"), metric(t, two, "tpot_p99")
	if !(m2.NoiseBand < m1.NoiseBand) {
		t.Errorf("two sessions should narrow the band: %.4f vs %.4f", m2.NoiseBand, m1.NoiseBand)
	}
	if _, err := Compare(b, c, tr, Options{CandidateSessions: sessions[:3]}); err == nil {
		t.Error("sessions not parallel to the runs: want an error")
	}
}

// regression_at: half calls a significant change past half the threshold;
// the default calls it only past the threshold.
func TestRegressionAtHalf(t *testing.T) {
	t.Parallel()
	lat := map[string]float64{"p99_tpot_ms": 14}
	b, c := runs(lat, 0.002, 0), runs(lat, 0.002, math.Log(1.035), "p99_tpot_ms")
	tr := tier(0.05, 0, "tpot_p99")
	if rep := compare(t, b, c, tr, Options{}); rep.Verdict == Regression {
		t.Errorf("+3.5%% at threshold 5%%: %s", rep.Verdict)
	}
	tr.RegressionAt = config.RegressionAtHalf
	if rep := compare(t, b, c, tr, Options{}); rep.Verdict != Regression || rep.RegressionAt != config.RegressionAtHalf {
		t.Errorf("+3.5%% at half of 5%%: %s", rep.Verdict)
	}
}

// The tier's inconclusive policy travels with the report: needs_ack makes
// an inconclusive check hold.
func TestInconclusivePolicy(t *testing.T) {
	t.Parallel()
	b, c := runs(lat, 0.16, 0), runs(lat, 0.16, math.Log(1.10), "p99_tpot_ms")
	tr := tier(0.05, 3, "tpot_p99")
	rep := compare(t, b, c, tr, Options{})
	if rep.Verdict != Inconclusive || rep.NeedsAck() || rep.InconclusivePolicy != config.InconclusiveNeutral {
		t.Errorf("default policy: %s needs ack %v (%s)", rep.Verdict, rep.NeedsAck(), rep.InconclusivePolicy)
	}
	tr.Inconclusive = config.InconclusiveNeedsAck
	rep = compare(t, b, c, tr, Options{})
	if !rep.NeedsAck() || !strings.Contains(rep.Policy(), "inconclusive: needs_ack") {
		t.Errorf("needs_ack: %v, policy %q", rep.NeedsAck(), rep.Policy())
	}
	if tight := runs(lat, 0.005, 0); compare(t, tight, tight, tr, Options{}).NeedsAck() {
		t.Error("a pass never needs an acknowledgement")
	}
}

// The merge tier's defaults, end to end on synthetic interleaved pairs: an
// unchanged commit passes and a 10% tpot_median regression regresses, both
// with JSON that marshals (error_rate is all zero).
func TestMergeTierDefaults(t *testing.T) {
	t.Parallel()
	merge, err := config.Default().Tier("merge")
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]float64{"median_tpot_ms": 11, "p90_ttft_ms": 700, "output_throughput": 5000}
	for _, tc := range []struct {
		shift float64
		want  Verdict
	}{{0, Pass}, {math.Log(1.10), Regression}} {
		b := append(runs(levels, 0.01, 0), runs(levels, 0.01, 0.001)[:3]...)
		h := append(runs(levels, 0.01, tc.shift, "median_tpot_ms"), runs(levels, 0.01, tc.shift+0.001, "median_tpot_ms")[:3]...)
		rep, err := ComparePaired(pairsOf(b, h), merge, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict != tc.want || rep.Pairs != 8 || rep.Design != DesignInterleaved {
			t.Errorf("shift %.2f: %s (%d pairs), want %s: %+v", tc.shift, rep.Verdict, rep.Pairs, tc.want, rep.Metrics)
		}
		if _, err := json.Marshal(rep); err != nil {
			t.Error(err)
		}
	}
}

// Holm's level for each p-value is α over the hypotheses left.
func TestHolmLevels(t *testing.T) {
	t.Parallel()
	got := holmLevels([]float64{0.03, 0.01, math.NaN(), 0.02}, 0.04)
	want := []float64{0.02, 0.01, 0.04, 0.04 / 3}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("holmLevels = %v, want %v", got, want)
		}
	}
}

// The session variance estimator: the excess of the set means' spread
// over the run-to-run part, pooled with the prior.
func TestSessionVarianceEstimator(t *testing.T) {
	t.Parallel()
	means := []float64{0.02, -0.02, 0.03, -0.03, 0}
	v, df := sessionVariance(means, []int{5, 5, 5, 5, 5}, 0.0005, 0, 0)
	want := stats.Variance(means) - 0.0005/5
	if math.Abs(v-want) > 1e-15 || df != 4 {
		t.Errorf("no prior: %g (%g df), want %g (4 df)", v, df, want)
	}
	v, df = sessionVariance(means, []int{5, 5, 5, 5, 5}, 0.0005, 0.0004, SessionPriorDF)
	if math.Abs(v-(4*want+8*0.0004)/12) > 1e-15 || df != 12 {
		t.Errorf("with prior: %g (%g df)", v, df)
	}
	if v, df := sessionVariance(nil, nil, 0.001, 0, 0); v != 0 || df != maxDF {
		t.Errorf("nothing known: %g, %g", v, df)
	}
	// Means tighter than the runs explain: no negative variance.
	if v, _ := sessionVariance([]float64{0, 0.0001}, []int{5, 5}, 0.01, 0, 0); v != 0 {
		t.Errorf("floored: %g", v)
	}
}

// The variance factors of a median of k means match a simulation.
func TestMedianVarianceFactor(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	for k := 2; k <= 9; k++ {
		const n = 40000
		xs := make([]float64, n)
		for i := range xs {
			v := make([]float64, k)
			for j := range v {
				v[j] = rng.NormFloat64()
			}
			xs[i] = stats.Median(v)
		}
		if got, want := stats.Variance(xs), medianVarianceFactor(k); math.Abs(got/want-1) > 0.06 {
			t.Errorf("k=%d: simulated %.4f, table %.4f", k, got, want)
		}
	}
}
