package gate

import (
	"fmt"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// The simulation at test size, interleaved merge tier as production runs
// it (history of four sessions, 2% session shifts, drift): quiet on A/A
// through five retests, catches an 8% tpot_median regression, where the
// seed's one-run rule cries wolf.
func TestSimulationInterleaved(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	cfg := SimConfig{Tier: merge, Design: DesignInterleaved, Gates: 300, Runs: 8, BaselineRuns: 5, HistorySets: 4,
		SessionCV: 0.02, Drift: 0.002, Deltas: []float64{0.08}, Retests: 5, Seed: 3, Models: DefaultNoiseModels[:1]}
	rows, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	naive, auto := rows[0], rows[2]
	if auto.FalseAlarm > 0.01 || auto.Detection[0] < 0.97 || auto.Retest[4] > 0.01 {
		t.Errorf("gate: false alarm %.3f, detection %.3f, after 5 retests %.3f", auto.FalseAlarm, auto.Detection[0], auto.Retest[4])
	}
	if naive.FalseAlarm < 0.2 {
		t.Errorf("naive rule false alarm %.3f: the model lost its noise", naive.FalseAlarm)
	}
}

// Stored baselines with 2% session shifts: the session term keeps the
// false alarms down (they were 9–10% without it).
func TestSimulationStoredSessionShift(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	cfg := SimConfig{Tier: merge, Design: DesignStored, Gates: 300, Runs: 5, BaselineRuns: 5, HistorySets: 4,
		SessionCV: 0.02, Drift: 0.002, Deltas: []float64{0.08}, Retests: 2, Seed: 4, Models: DefaultNoiseModels[:1]}
	rows, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fa := rows[2].Retest[1]; fa > 0.01 {
		t.Errorf("stored, 2%% session shifts: false alarms after 2 retests %.3f", fa)
	}
	// Without the session term (a tier that assumes none and a history
	// of one session) the same world raises false alarms.
	merge.SessionNoise = 0
	cfg.Tier, cfg.HistorySets = merge, 0
	rows, err = Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rows[2].FalseAlarm < 0.02 {
		t.Errorf("without a session term false alarms %.3f: the case no longer shows session shifts", rows[2].FalseAlarm)
	}
}

// A seeded simulation is reproducible: the figures in a note can be re-run.
func TestSimulationDeterministic(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	for _, design := range []string{DesignStored, DesignInterleaved} {
		cfg := SimConfig{Tier: merge, Design: design, Gates: 60, Runs: 5, BaselineRuns: 5, HistorySets: 2, SessionCV: 0.02, Drift: 0.002,
			Deltas: []float64{0.08}, Retests: 2, Seed: 9, Models: DefaultNoiseModels[:1]}
		a, err := Simulate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Simulate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if fmt.Sprintf("%+v", a[i]) != fmt.Sprintf("%+v", b[i]) { // NaN != NaN: compare the printed rows
				t.Errorf("%s row %d differs between two runs with one seed: %+v vs %+v", design, i, a[i], b[i])
			}
		}
	}
}
