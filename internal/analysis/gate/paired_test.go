package gate

import (
	"math"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// pairsOf pairs base and head runs index by index in one session, ABBA.
func pairsOf(base, head []*result.Result) []Pair {
	out := make([]Pair, len(base))
	for i := range base {
		out[i] = Pair{Session: "1", Index: i, Base: base[i], Head: head[i], HeadFirst: i%2 == 1}
	}
	return out
}

// A session shift moves both sides of every pair: the paired test sees
// through it where a stored baseline from another session cannot.
func TestPairedCancelsSessionShift(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_p99")
	tr.SessionNoise = 0.02
	// The head is 8% slower, measured in a session 6% faster than usual.
	head := runs(lat, 0.01, math.Log(1.08)-0.06, "p99_tpot_ms")
	inSession := runs(lat, 0.01, -0.06, "p99_tpot_ms")
	rep, err := ComparePaired(pairsOf(inSession, head), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := metric(t, rep, "tpot_p99"); rep.Verdict != Regression || m.SessionSD != 0 || math.Abs(m.Estimate-0.08) > 1e-9 {
		t.Errorf("8%% slower in one shifted session, paired: %s %+v", rep.Verdict, m)
	}
	stored := compare(t, runs(lat, 0.01, 0), head, tr, Options{})
	if stored.Verdict == Regression {
		t.Errorf("against a baseline of an unshifted session the head looks 1.5%% slower: %s", stored.Verdict)
	}
}

// The job's own variance always counts: a history of tight sessions does
// not sharpen three noisy pairs (it did: 16 df of a quiet card outweighed
// the job's own and set the band alone), while a noisier history widens
// them; the degrees of freedom stay the job's.
func TestPairedHistoryOnlyWidens(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 0, "tpot_p99")
	b, h := runs(lat, 0.03, 0)[:3], runs(lat, 0.03, math.Log(1.10), "p99_tpot_ms")[:3]
	h[0], h[2] = h[2], h[0] // ratios 10% ± 6%: a noisy estimate
	alone, err := ComparePaired(pairsOf(b, h), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ma := metric(t, alone, "tpot_p99")
	if ma.DF != 2 || alone.Verdict == Regression {
		t.Errorf("no history: df %.0f, %s", ma.DF, alone.Verdict)
	}
	for _, tc := range []struct {
		name  string
		cv    float64
		wider bool
	}{{"quiet history", 0.005, false}, {"noisy history", 0.15, true}} {
		var hist History
		for i := 0; i < 6; i++ {
			hist.Sessions = append(hist.Sessions, Session{Runs: runs(lat, tc.cv, 0)})
		}
		with, err := ComparePaired(pairsOf(b, h), tr, Options{History: hist})
		if err != nil {
			t.Fatal(err)
		}
		m := metric(t, with, "tpot_p99")
		if m.DF != 2 || (m.PairSD > ma.PairSD*(1+1e-9)) != tc.wider || m.PairSD < ma.PairSD*(1-1e-9) || with.Verdict == Regression {
			t.Errorf("%s: df %.0f pair sd %.4f (alone %.4f), %s", tc.name, m.DF, m.PairSD, ma.PairSD, with.Verdict)
		}
	}
	// Interleaved history (A/A pairs) is preferred to the sessions'.
	aa := pairsOf(runs(lat, 0.02, 0), runs(lat, 0.03, 0))
	pv, df := (&judge{cache: newSeriesCache()}).pairPrior(mustMetric(t, "tpot_p99"), nil, [][]Pair{aa})
	if df != 4 || pv <= 0 {
		t.Errorf("pair prior from A/A pairs: %g with %g df", pv, df)
	}
}

func mustMetric(t *testing.T, name string) config.Metric {
	t.Helper()
	m, ok := config.LookupMetric(name)
	if !ok {
		t.Fatal(name)
	}
	return m
}

// Too few pairs ask for the tier's pairs; an inconclusive interleaved job
// asks for twice as many; the engine image may differ between base and
// head (it is what is compared), the card may not.
func TestPairedEvidence(t *testing.T) {
	t.Parallel()
	tr := tier(0.05, 3, "tpot_p99")
	tr.Pairs = 8
	b, h := runs(lat, 0.01, 0), runs(lat, 0.01, 0)
	rep, err := ComparePaired(pairsOf(b[:2], h[:2]), tr, Options{})
	if err != nil || rep.Verdict != Inconclusive || rep.NeedMoreRuns != 8 {
		t.Fatalf("2 pairs: %v %+v", err, rep)
	}
	noisy := runs(lat, 0.2, 0)
	rep, err = ComparePaired(pairsOf(noisy, runs(lat, 0.2, math.Log(1.05), "p99_tpot_ms")), tr, Options{})
	if err != nil || rep.Verdict != Inconclusive || rep.NeedMoreRuns != 16 || !strings.Contains(strings.Join(rep.Notes, " "), "pair(s)") {
		t.Errorf("noisy pairs: %v %s need %d notes %v", err, rep.Verdict, rep.NeedMoreRuns, rep.Notes)
	}
	for _, r := range h {
		r.Perfgate.Environment.EngineImage = "vllm@sha256:head"
	}
	if rep, err := ComparePaired(pairsOf(b, h), tr, Options{}); err != nil || len(rep.Mismatches) != 0 {
		t.Errorf("engine image differs: %v %+v", err, rep.Mismatches)
	}
	h[1].Perfgate.Environment.GPUUUID = "GPU-2"
	if rep, err := ComparePaired(pairsOf(b, h), tr, Options{}); err != nil || rep.Verdict != Inconclusive || len(rep.Mismatches) != 1 {
		t.Errorf("another card: %v %+v", err, rep)
	}
	h[1].Perfgate.Environment.GPUUUID = "GPU-1"
	h[3].Perfgate.GPU.Valid, h[3].Perfgate.GPU.Invalid = false, []string{"throttled"}
	if rep, err := ComparePaired(pairsOf(b, h), tr, Options{}); err != nil || rep.Pairs != 4 || len(rep.ExcludedRuns) != 1 {
		t.Errorf("a throttled head run drops its pair: %v %+v", err, rep)
	}
}

// Uploaded runs become pairs by (session, pair index); a lone run is left
// out with a note, and a side other than base/head is an error.
func TestMakePairs(t *testing.T) {
	t.Parallel()
	r := runs(lat, 0.01, 0)
	in := []SidedRun{
		{Session: "12", Side: SideHead, Pair: 1, Seq: 2, Result: r[0]},
		{Session: "12", Side: SideBase, Pair: 0, Seq: 0, Result: r[1]},
		{Session: "12", Side: SideHead, Pair: 0, Seq: 1, Result: r[2]},
		{Session: "12", Side: SideBase, Pair: 1, Seq: 3, Result: r[3]},
		{Session: "9", Side: SideBase, Pair: 0, Seq: 0, Result: r[4]},
	}
	pairs, notes, err := MakePairs(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 2 || pairs[0].Index != 0 || pairs[0].Base != r[1] || pairs[0].HeadFirst || pairs[1].Head != r[0] || !pairs[1].HeadFirst {
		t.Errorf("pairs = %+v", pairs)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "pair 0 of session 9 has only its base run") {
		t.Errorf("notes = %v", notes)
	}
	if _, _, err := MakePairs([]SidedRun{{Session: "1", Side: "left", Result: r[0]}}); err == nil {
		t.Error("side left: want an error")
	}
	if _, _, err := MakePairs([]SidedRun{{Session: "1", Side: SideBase, Result: r[0]}, {Session: "1", Side: SideBase, Result: r[1]}}); err == nil {
		t.Error("two base runs in one pair: want an error")
	}
}
