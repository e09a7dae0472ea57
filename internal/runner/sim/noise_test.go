package sim

import (
	"math"
	"testing"
	"time"
)

// logStats returns the mean and std-dev of log(x).
func logStats(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += math.Log(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := math.Log(x) - mean
		std += d * d
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

func TestNoiseCardFactorDiffersByInstance(t *testing.T) {
	n := Noise{CardCV: 0.03}
	a, b := newNoiseModel(Noise{CardCV: 0.03, InstanceSeed: 11}, 1), newNoiseModel(Noise{CardCV: 0.03, InstanceSeed: 12}, 1)
	if a.factor(0) == b.factor(0) {
		t.Errorf("instances 11 and 12 have the same card factor %g", a.factor(0))
	}
	// The card is fixed for the engine's life and independent of the run seed.
	again := newNoiseModel(Noise{CardCV: 0.03, InstanceSeed: 11}, 99)
	if again.factor(time.Hour) != a.factor(0) {
		t.Errorf("card 11: %g with seed 1, %g with seed 99 an hour later", a.factor(0), again.factor(time.Hour))
	}
	// InstanceSeed 0 takes the run seed.
	if newNoiseModel(n, 5).card != newNoiseModel(Noise{CardCV: 0.03, InstanceSeed: 5}, 1).card {
		t.Error("instance seed 0 does not fall back to the seed")
	}
	// Across many cards the log factor has the configured spread.
	cards := make([]float64, 4000)
	for i := range cards {
		cards[i] = newNoiseModel(Noise{CardCV: 0.03, InstanceSeed: int64(i + 1)}, 1).factor(0)
	}
	mean, std := logStats(cards)
	if math.Abs(mean) > 0.003 || math.Abs(std-0.03) > 0.003 {
		t.Errorf("log card factor mean %.4f std %.4f over %d cards, want 0 and 0.03", mean, std, len(cards))
	}
}

func TestNoiseClockStateShiftsAtTheConfiguredSize(t *testing.T) {
	const every = time.Minute
	m := newNoiseModel(Noise{SessionCV: 0.02, SessionEvery: every}, 3)
	// Sample once per 10 s for 2000 minutes: levels are piecewise constant,
	// change about once a minute, and have the configured spread.
	var levels []float64
	changes, last := 0, m.factor(0)
	for ti := time.Duration(0); ti < 2000*every; ti += 10 * time.Second {
		f := m.factor(ti)
		if f != last {
			changes++
			levels = append(levels, f)
		}
		last = f
	}
	if changes < 1500 || changes > 2100 {
		t.Errorf("%d clock-state changes in 2000 min with a mean of one a minute", changes)
	}
	mean, std := logStats(levels)
	if math.Abs(mean) > 0.005 || math.Abs(std-0.02) > 0.003 {
		t.Errorf("log clock state mean %.4f std %.4f, want 0 and 0.02", mean, std)
	}
	// Engine starts with different seeds start in different states: the
	// session-to-session shift.
	starts := make([]float64, 3000)
	for i := range starts {
		starts[i] = newNoiseModel(Noise{SessionCV: 0.02, SessionEvery: every}, int64(i+1)).factor(0)
	}
	if _, std := logStats(starts); math.Abs(std-0.02) > 0.003 {
		t.Errorf("log clock state at start has std %.4f across seeds, want 0.02", std)
	}
	// With SessionEvery 0 the state is fixed for the run.
	fixed := newNoiseModel(Noise{SessionCV: 0.02}, 3)
	if fixed.factor(0) != fixed.factor(10*time.Hour) {
		t.Error("clock state moved with SessionEvery 0")
	}
}

func TestNoiseDriftAndThrottle(t *testing.T) {
	d := newNoiseModel(Noise{DriftPerHour: 0.02}, 1)
	if got := d.factor(0); got != 1 {
		t.Errorf("drift factor at start %g", got)
	}
	if got := d.factor(90 * time.Minute); math.Abs(got-1.03) > 1e-9 {
		t.Errorf("drift factor after 90 min %g, want 1.03", got)
	}

	th := newNoiseModel(Noise{ThrottleEvery: 10 * time.Second, ThrottleFor: 2 * time.Second, ThrottleSlowdown: 0.2}, 7)
	var throttled, total, episodes int
	in := false
	for ti := time.Duration(0); ti < 5*time.Hour; ti += 100 * time.Millisecond {
		f := th.factor(ti)
		switch f {
		case 1.2:
			throttled++
			if !in {
				episodes++
			}
			in = true
		case 1:
			in = false
		default:
			t.Fatalf("throttle factor %g at %v, want 1 or 1.2", f, ti)
		}
		total++
	}
	// Episodes of 2 s every 10 s on average: 2/12 of the time.
	if share := float64(throttled) / float64(total); math.Abs(share-2.0/12) > 0.02 {
		t.Errorf("throttled %.3f of the time, want %.3f", share, 2.0/12)
	}
	if want := 5 * 3600 / 12; episodes < want*8/10 || episodes > want*12/10 {
		t.Errorf("%d throttle episodes in 5 h, want about %d", episodes, want)
	}
}

func TestNoiseOffIsExactlyOne(t *testing.T) {
	m := newNoiseModel(DefaultConfig().Quiet().Noise, 1)
	for _, at := range []time.Duration{0, time.Second, time.Hour, 100 * time.Hour} {
		if f := m.factor(at); f != 1 {
			t.Errorf("quiet noise factor %g at %v", f, at)
		}
	}
	// The quiet engine's steps are exactly the cost model's.
	cfg := DefaultConfig().Quiet()
	sm := newStepModel(cfg)
	w := stepWork{seqs: 3, decodeSeqs: 3}
	if got, want := sm.duration(w, time.Hour), sm.nominal(w); got != want {
		t.Errorf("quiet step %v, want nominal %v", got, want)
	}
}

func TestDefaultNoiseHasNoThrottleInTheFirstMinutes(t *testing.T) {
	// The demo and the quick start run a few minutes on the default seed;
	// a throttle episode there would make their numbers depend on timing.
	m := newNoiseModel(DefaultNoise(), DefaultConfig().Seed)
	for ti := time.Duration(0); ti < 10*time.Minute; ti += 100 * time.Millisecond {
		if m.throttle(ti) != 1 {
			t.Fatalf("default seed throttles at %v", ti)
		}
	}
}
