package gate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// A noise profile gives per-metric CVs; a misspelt metric, a CV that is
// not a fraction or an unknown key is refused with the file named.
func TestLoadNoiseProfile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "..", "testdata", "gate", "profile")
	p, err := LoadNoiseProfile(filepath.Join(dir, "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stress()
	if st.World.CVs["median_tpot_ms"] != 0.015 || st.World.CVs["p90_ttft_ms"] != 0.04 || st.Model.CV != 0.04 || st.World.StartCV != 0.01 || p.SessionCV != 0.02 {
		t.Errorf("profile %+v as stress %+v", p, st)
	}
	for file, want := range map[string]string{
		"unknown-metric.json": `unknown metric "tpot_p50x"`,
		"bad-cv.json":         "CV of tpot_median is 2",
		"unknown-field.json":  `unknown field "cvs"`,
	} {
		if _, err := LoadNoiseProfile(filepath.Join(dir, file)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}
}

// The stress table at test size: the merge tier's procedure stays quiet
// on A/A, catches +8%, spends more GPU-minutes on a regression near the
// line than on a clean PR, and a profile adds its own row.
func TestSimulateStress(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	p, err := LoadNoiseProfile(filepath.Join("..", "..", "..", "testdata", "gate", "profile", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := StressConfig{Tier: merge, Gates: 300, DeltaGates: 150, Deltas: []float64{0.03, 0.08}, HistorySets: 4, SessionCV: 0.02, Drift: 0.002,
		RunMinutes: 1, StartMinutes: 0.5, Seed: 7, Stresses: Stresses()[:2], Profile: &p}
	rows, err := SimulateStress(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].Stress != "profile: example (not a measurement)" {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.FalseAlarm > 0.01 || r.Detection[1] < 0.9 || r.GPUMinutes < 20 || r.GPUMinutesAt[0] <= r.GPUMinutes {
			t.Errorf("%s: FA %.3f, +8%% %.3f, GPU-min A/A %.0f, +3%% %.0f", r.Stress, r.FalseAlarm, r.Detection[1], r.GPUMinutes, r.GPUMinutesAt[0])
		}
		// The reference tests ran on the same runs, calibrated to at most
		// α of the A/A PRs, and the information limit is not below the
		// gate (up to the sampling noise of 150 PRs).
		for k, ref := range r.Refs {
			if !ref.Available() || ref.AA > 0.005 || len(ref.Detection) != 2 {
				t.Errorf("%s: %s %+v", r.Stress, RefNames[k], ref)
			}
		}
		if lim := r.Refs[RefOracle].Detection; len(lim) == 2 && (lim[1] < 0.95 || lim[0] < r.Detection[0]-0.08) {
			t.Errorf("%s: oracle caught +3%% %.3f, +8%% %.3f; the gate +3%% %.3f", r.Stress, lim[0], lim[1], r.Detection[0])
		}
	}
	var sb strings.Builder
	if err := WriteStressTable(&sb, cfg, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"false alarm", "clean → human", "+3% caught", "GPU-min A/A", "per-start state 2%", "settle budget 150 GPU-min", "best +3% (REML)", "limit +3% (oracle)", "plan of 4 looks (pocock)"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, sb.String())
		}
	}
}

// Settling converges: on a noisy job (CV 4%, history 2%) clean PRs left to
// a human fall from the first look's share to almost none once the pairs
// double within the settle budget (the last look's own rule is guarded by
// TestLastLookDecides).
func TestLooksConverge(t *testing.T) {
	t.Parallel()
	merge, _ := config.Default().Tier("merge")
	st := Stresses()[5]
	if st.Name != "job CV 4%, history 2%" {
		t.Fatalf("stress %q", st.Name)
	}
	human := func(budget int) float64 {
		tr := merge
		tr.SettleGPUMinutes = budget
		rows, err := SimulateStress(StressConfig{Tier: tr, Gates: 300, DeltaGates: 1, Deltas: []float64{0.05}, HistorySets: 4, SessionCV: 0.02,
			Drift: 0.002, RunMinutes: 1, StartMinutes: 0.5, Seed: 11, Stresses: []Stress{st}})
		if err != nil {
			t.Fatal(err)
		}
		return rows[0].Human
	}
	first, settled := human(0), human(150)
	if first < 0.10 || settled > 0.02 {
		t.Errorf("clean PRs needing a human: %.1f%% after the first look, %.1f%% after settling", 100*first, 100*settled)
	}
}
