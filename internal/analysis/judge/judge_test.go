package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// fixture loads recorded vLLM results from testdata/gate.
func fixture(t *testing.T, names ...string) []*result.Result {
	t.Helper()
	var out []*result.Result
	for _, n := range names {
		runs, err := gate.LoadRuns("../../../testdata/gate/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, runs...)
	}
	return out
}

func tierOf(t *testing.T, name string) config.Tier {
	t.Helper()
	tier, err := config.Default().Tier(name)
	if err != nil {
		t.Fatal(err)
	}
	return tier
}

// Every outcome a judgement can have, from the inputs that call for it.
func TestJudgeOutcomes(t *testing.T) {
	quick := tierOf(t, "quick")
	cands := fixture(t, "vllm-candidate-1.json", "vllm-candidate-2.json", "vllm-candidate-3.json")
	base := &Base{Runs: fixture(t, "vllm-baseline.json"), Version: 3}
	noSettle := withSettle(quick, 0)
	// A plan of one look, spent on these runs (or on fewer).
	first := Judge(Input{Tier: noSettle, Key: "quick", Runs: Evidence{Runs: cands}, Base: base, Looks: gate.SingleLook()})
	if first.Outcome != Publish {
		t.Fatalf("the one-look plan: %s %v", first.Outcome, first.Reasons)
	}
	spent := func(runs int) gate.Looks {
		l := first.Looks["quick"]
		l.Spent = append([]gate.Look{}, l.Spent...)
		l.Spent[0].CandidateRuns = runs
		return l
	}
	for _, tc := range []struct {
		name        string
		in          Input
		want        Outcome
		runnerFault bool
		reason      string // a reason or note the decision must hold
	}{
		{"agent lost", Input{Runs: Evidence{Failures: []string{"job 4: agent lost: lease expired"}}}, Broken, true, "agent lost"},
		{"engine failed beside a lost agent", Input{Runs: Evidence{Failures: []string{"job 4: agent lost", "job 5: engine never became ready"}}}, Broken, false, "engine never became ready"},
		{"nothing measured, nothing said", Input{Job: Ended{ID: 7, Status: "succeeded"}}, Broken, false, "job 7 ended succeeded with no measured runs"},
		{"no baseline", Input{Tier: quick, Key: "quick", Runs: Evidence{Runs: cands}}, MeasureBase, false, ""},
		{"base commit not measured", Input{Key: "quick", MeasuredBase: &Evidence{Failures: []string{"job 9: agent lost"}}}, Broken, true, "the baseline measurement of the base commit failed"},
		{"compared", Input{Tier: noSettle, Key: "quick", Runs: Evidence{Runs: cands}, Base: base}, Publish, false, ""},
		{"settle budget pays for more runs", Input{Tier: quick, Key: "quick", Runs: Evidence{Runs: cands}, Base: base}, Extend, false, ""},
		{"looks spent, nothing new, verdict stored", Input{Tier: noSettle, Key: "quick", Runs: Evidence{Runs: cands}, Base: base, Looks: spent(3), Stored: true}, Stands, false, ""},
		{"looks spent, nothing stored: judged again", Input{Tier: noSettle, Key: "quick", Runs: Evidence{Runs: cands}, Base: base, Looks: spent(3)}, Publish, false, ""},
		{"looks spent, new runs: a new plan", Input{Tier: noSettle, Key: "quick", Runs: Evidence{Runs: cands}, Base: base, Looks: spent(2), Stored: true}, Publish, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Judge(tc.in)
			if d.Outcome != tc.want || d.RunnerFault != tc.runnerFault {
				t.Fatalf("outcome %s (runner's fault %v), want %s (%v): %+v", d.Outcome, d.RunnerFault, tc.want, tc.runnerFault, d)
			}
			if tc.reason != "" && !strings.Contains(strings.Join(d.Reasons, "\n"), tc.reason) {
				t.Errorf("reasons %q do not say %q", d.Reasons, tc.reason)
			}
			if (d.Outcome == Publish || d.Outcome == Extend) != (d.Report != nil) {
				t.Errorf("%s with report %v", d.Outcome, d.Report)
			}
		})
	}
}

func withSettle(t config.Tier, minutes int) config.Tier {
	t.SettleGPUMinutes = minutes
	return t
}

// A base commit measured for the check is its baseline and is promoted;
// the promotion's note has its place among the notes the store fills in.
func TestMeasuredBaseIsPromoted(t *testing.T) {
	cands := fixture(t, "vllm-candidate-1.json", "vllm-candidate-2.json", "vllm-candidate-3.json")
	measured := fixture(t, "vllm-baseline.json")
	d := Judge(Input{Tier: withSettle(tierOf(t, "quick"), 0), Key: "quick", Runs: Evidence{Runs: cands, Bad: []string{"run 4 of job 2 was left out"}},
		MeasuredBase: &Evidence{Runs: measured}})
	if d.Outcome != Publish || len(d.Promotions) != 1 {
		t.Fatalf("outcome %s, promotions %+v; want a verdict and one promotion", d.Outcome, d.Promotions)
	}
	p := d.Promotions[0]
	if p.Key != "quick" || p.Label != "" || len(p.Runs) != len(measured) || p.At != 1 || !strings.Contains(d.Notes[p.At], "promoted") {
		t.Errorf("promotion %+v, notes %q: want the base runs under quick, its note after the bad run's", p, d.Notes)
	}
}

// The settle budget's arithmetic: a run costs the jobs' time per run, the
// added jobs spend, and the look before a doubling the budget cannot pay
// for is the last.
func TestSettleBudget(t *testing.T) {
	tier := withSettle(tierOf(t, "merge"), 30)
	for _, tc := range []struct {
		name                  string
		jobs                  []JobTime
		perRun, spent         float64
		fits8, last7, pairsOf bool
	}{
		{"unknown times: a minute a run", []JobTime{{Runs: 5}}, 1, 0, true, false, false},
		{"timed jobs", []JobTime{{Runs: 5, Minutes: 10}, {Runs: 5, Minutes: 10, Added: true}}, 2, 10, true, false, false},
		{"added untimed", []JobTime{{Runs: 5, Minutes: 15}, {Runs: 10, Added: true}}, 3, 10, false, true, false},
		{"interleaved pairs cost two runs", []JobTime{{Runs: 16, Interleaved: true, Minutes: 16}}, 1, 0, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Settle{Jobs: tc.jobs}.spend(tier)
			if b.perRun != tc.perRun || b.spent != tc.spent || b.interleaved != tc.pairsOf {
				t.Fatalf("per run %g spent %g interleaved %v, want %g %g %v", b.perRun, b.spent, b.interleaved, tc.perRun, tc.spent, tc.pairsOf)
			}
			if b.fits(8) != tc.fits8 || b.last(7) != tc.last7 {
				t.Errorf("fits(8) %v last(7) %v, want %v %v", b.fits(8), b.last(7), tc.fits8, tc.last7)
			}
		})
	}
	if (Settle{}).spend(withSettle(tier, 0)).fits(1) {
		t.Error("a tier without a settle budget pays for runs")
	}
}

// A commit that changes no file continues the newest budget an earlier
// commit of the pull request left; one that changes code starts afresh.
func TestEarlierLooks(t *testing.T) {
	run := &result.Result{Perfgate: &result.Section{Environment: result.Environment{SourceTree: "tree-a"}}}
	old := gate.Looks{Max: 4, Spent: []gate.Look{{CandidateRuns: 5}}}
	newer := gate.Looks{Max: 4, Spent: []gate.Look{{CandidateRuns: 5}, {CandidateRuns: 10}}}
	other := gate.Looks{Max: 4, Spent: []gate.Look{{CandidateRuns: 3}}}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	earlier := []EarlierLooks{{SourceTree: "tree-a", Looks: newer, UpdatedAt: t0.Add(time.Hour)}, {SourceTree: "tree-a", Looks: old, UpdatedAt: t0}, {SourceTree: "tree-b", Looks: other, UpdatedAt: t0.Add(2 * time.Hour)}}
	for _, tc := range []struct {
		name string
		in   Input
		want int
	}{
		{"same tree: the newest", Input{Earlier: earlier}, 2},
		{"own budget first", Input{Looks: other, Earlier: earlier}, 1},
		{"no earlier", Input{}, 0},
		{"other tree only", Input{Earlier: earlier[2:]}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := prLooks(tc.in, []*result.Result{run}); len(got.Spent) != tc.want {
				t.Errorf("continued %+v, want %d looks spent", got, tc.want)
			}
		})
	}
}

// A matrix reports the worst cell; a cell without a baseline has its runs
// promoted and each cell with runs goes on the trend.
func TestMatrix(t *testing.T) {
	cands := fixture(t, "vllm-candidate-1.json", "vllm-candidate-2.json", "vllm-candidate-3.json")
	base := &Base{Runs: fixture(t, "vllm-baseline.json")}
	d := Judge(Input{Tier: tierOf(t, "quick"), Key: "nightly", Cells: []Cell{
		{Label: "c=8", Job: 2, Runs: Evidence{Runs: cands}, Base: base},
		{Label: "c=1", Job: 1, Runs: Evidence{Runs: cands}},
		{Label: "c=64", Job: 3, Runs: Evidence{Failures: []string{"job 3: agent lost"}}},
	}})
	if d.Outcome != Publish || d.Report.Verdict == gate.Pass {
		t.Fatalf("outcome %s verdict %v: want a published, not passing matrix (a cell measured nothing)", d.Outcome, d.Report)
	}
	if len(d.Promotions) != 1 || d.Promotions[0].Key != "nightly/c=1" || !strings.HasPrefix(d.Notes[d.Promotions[0].At], "c=1: ") {
		t.Errorf("promotions %+v notes %q: want c=1's runs promoted, its note in place", d.Promotions, d.Notes)
	}
	if len(d.Trends) != 2 || d.Trends[0].Key != "nightly/c=1" || d.Trends[1].Job != 2 {
		t.Errorf("trends %+v: want c=1 and c=8, in label order", d.Trends)
	}
	for _, m := range d.Report.Metrics {
		if !strings.HasPrefix(m.Metric, "c=8 ") {
			t.Errorf("metric %q not named by its cell", m.Metric)
		}
	}
}

func TestWorse(t *testing.T) {
	order := []gate.Verdict{gate.Pass, gate.Inconclusive, gate.Regression}
	for i, a := range order {
		for j, b := range order {
			if got, want := Worse(a, b), order[max(i, j)]; got != want {
				t.Errorf("Worse(%s, %s) = %s, want %s", a, b, got, want)
			}
		}
	}
}
