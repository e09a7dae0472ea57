package longrun

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/soak"
)

func TestCapacityDocument(t *testing.T) {
	t.Parallel()
	k := func(rate, below float64) capacity.Knee { return capacity.Knee{Rate: rate, Below: below} }
	censored := func(rate float64) capacity.Knee { return capacity.Knee{Rate: rate, Censored: true} }
	distorted := capacity.Knee{Rate: 4, Below: 0, Censored: true, Distorted: "the host distorted every one of 3 tries at 8 requests/s (client-bound)"}
	for _, tc := range []struct {
		name       string
		c          capacity.Comparison
		verdict    gate.Verdict
		rule, row  string
		headline   string
		delta, thr string
	}{
		{"knee halves", capacity.Compare([]capacity.Knee{k(8, 8.7)}, []capacity.Knee{k(4, 4.4)}, 0.1), gate.Regression, gate.RuleCapacity, gate.MetricRegression,
			"Regression: sustainable rate 8.00 req/s → 4.00 req/s (−50.0%, threshold −10%): head failed at 4.40 req/s, which base sustained.", "−50.0%", "−10%"},
		{"knee doubles", capacity.Compare([]capacity.Knee{k(4, 4.4)}, []capacity.Knee{k(8, 8.7)}, 0.1), gate.Pass, gate.RuleCapacity, gate.MetricImprovement,
			"Improved: sustainable rate 4.00 req/s → 8.00 req/s (+100.0%, threshold −10%): head sustained 8.00 req/s, where base failed.", "+100.0%", "−10%"},
		{"within threshold", capacity.Compare([]capacity.Knee{k(8, 8.7)}, []capacity.Knee{k(7.6, 8)}, 0.1), gate.Pass, gate.RuleCapacity, gate.MetricPass,
			"No regression: sustainable rate 8.00 req/s → 7.60 req/s (−5.0%, threshold −10%): a change smaller than the threshold either way.", "−5.0%", "−10%"},
		{"ranges overlap", capacity.Compare([]capacity.Knee{k(8, 8.7), k(10, 11)}, []capacity.Knee{k(7, 7.5), k(7.4, 9)}, 0.1), gate.Inconclusive, gate.RuleCapacity, gate.MetricInconclusive,
			"Inconclusive: sustainable rate 9.00 req/s → 7.20 req/s (−20.0%, threshold −10%): the knees' ranges overlap: sweep again or narrow the resolution.", "−20.0%", "−10%"},
		{"host distorted the head", capacity.Compare([]capacity.Knee{censored(32)}, []capacity.Knee{distorted}, 0.1), gate.Inconclusive, gate.RuleCannotTell, gate.MetricInconclusive,
			"Inconclusive: cannot tell: head's sweep stopped because the host distorted every one of 3 tries at 8 requests/s (client-bound); measure again on a quieter runner.", "—", "−10%"},
		{"no head sweep", capacity.Compare([]capacity.Knee{k(8, 8.7)}, nil, 0.1), gate.Inconclusive, gate.RuleCannotTell, gate.MetricInconclusive,
			"Inconclusive: cannot tell: no sweep finished on one side; measure again.", "—", "−10%"},
		{"the nightly's head alone", capacity.Record([]capacity.Knee{k(8, 8.7), k(8, 9)}, 0.1), gate.Pass, gate.RuleRecorded, gate.MetricPass,
			"Recorded: sustainable rate 8.00 req/s; no base was swept, so nothing is compared.", "—", "−10%"},
		{"base sustains nothing", capacity.Compare([]capacity.Knee{k(0, 0.5)}, []capacity.Knee{k(2, 2.2)}, 0.1), gate.Pass, gate.RuleCapacity, gate.MetricImprovement,
			"", "—", "−10%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := Capacity(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			m := rep.Metrics[0]
			if rep.Verdict != tc.verdict || rep.Rule != tc.rule || m.Verdict != tc.row {
				t.Errorf("verdict %s by %s, row %s; want %s by %s, row %s (%s)", rep.Verdict, rep.Rule, m.Verdict, tc.verdict, tc.rule, tc.row, rep.Headline)
			}
			if tc.headline != "" && rep.Headline != tc.headline {
				t.Errorf("headline %q\nwant     %q", rep.Headline, tc.headline)
			}
			if m.DeltaText() != tc.delta || m.ThresholdText() != tc.thr {
				t.Errorf("Δ %s threshold %s, want %s %s", m.DeltaText(), m.ThresholdText(), tc.delta, tc.thr)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("the document does not encode: %v", err)
			}
		})
	}
}

// A worse knee is never an improvement, and never a pass past the
// threshold: over random sweeps of both sides, the document's verdict
// follows the sign of the change.
func TestCapacityNeverReversesAWorseKnee(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 31))
	knee := func(centre float64) capacity.Knee {
		r := centre * (0.8 + 0.4*rng.Float64())
		return capacity.Knee{Rate: r, Below: r * (1.05 + 0.2*rng.Float64())}
	}
	for i := range 2000 {
		b, h := 2+30*rng.Float64(), 2+30*rng.Float64()
		var base, head []capacity.Knee
		for range 1 + rng.IntN(3) {
			base, head = append(base, knee(b)), append(head, knee(h))
		}
		rep, err := Capacity(capacity.Compare(base, head, 0.1))
		if err != nil {
			t.Fatal(err)
		}
		m := rep.Metrics[0]
		if m.Candidate < m.Baseline && (m.Verdict == gate.MetricImprovement || strings.HasPrefix(rep.Headline, "Improved")) {
			t.Fatalf("trial %d: a worse knee called an improvement: %s", i, rep.Headline)
		}
		if m.Estimate <= -0.1 && rep.Verdict == gate.Pass {
			t.Fatalf("trial %d: a knee %s lower passed: %s", i, m.DeltaText(), rep.Headline)
		}
	}
}

func TestSoakDocument(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture  string
		verdict  gate.Verdict
		regress  []string
		headline string
	}{
		{"leak.json", gate.Regression, []string{"rss", "tpot_p50"}, "Regression: rss +260.9 MB/h (threshold +64 MB/h); TPOT p50 +28.9%/h (threshold +10%/h)."},
		{"clean.json", gate.Pass, nil, "No regression: every judged trend (6) is within its limit."},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			var samples []soak.Sample
			b, err := os.ReadFile(filepath.Join("..", "soak", "testdata", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &samples); err != nil {
				t.Fatal(err)
			}
			judged := soak.Judge(samples, soak.DefaultThresholds())
			rep, err := Soak(judged)
			if err != nil {
				t.Fatal(err)
			}
			var regressed []string
			for i, m := range rep.Metrics {
				if m.Verdict == gate.MetricRegression {
					regressed = append(regressed, m.Metric)
				}
				if (m.Verdict == gate.MetricRegression) != (judged.Trends[i].Status == soak.Fail) {
					t.Errorf("%s: row %s, trend %s", m.Metric, m.Verdict, judged.Trends[i].Status)
				}
			}
			if rep.Verdict != tc.verdict || rep.Headline != tc.headline || strings.Join(regressed, ",") != strings.Join(tc.regress, ",") {
				t.Errorf("%s %q, regressed %v; want %s %q, %v", rep.Verdict, rep.Headline, regressed, tc.verdict, tc.headline, tc.regress)
			}
		})
	}
	// Too short a run judges no trend: it cannot tell, and says so.
	rep, err := Soak(soak.Judge(nil, soak.DefaultThresholds()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != gate.Inconclusive || rep.Rule != gate.RuleCannotTell || !strings.HasPrefix(rep.Headline, "Inconclusive: cannot tell, no row could be judged (rss: 0 samples after the warm-up, 8 needed") {
		t.Errorf("an empty soak: %s by %s: %q", rep.Verdict, rep.Rule, rep.Headline)
	}
}
