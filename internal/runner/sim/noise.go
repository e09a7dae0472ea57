package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Noise is the GPU-like variation of step times other than per-step jitter;
// the package comment describes the model. The zero value is no noise.
type Noise struct {
	InstanceSeed     int64         // the simulated card; 0 = derived from Config.Seed
	CardCV           float64       // std-dev of the log card speed factor across instances
	SessionCV        float64       // std-dev of the log clock state
	SessionEvery     time.Duration // mean time between clock-state changes; 0 = one state per run
	DriftPerHour     float64       // relative change of step time per hour since start (signed)
	ThrottleEvery    time.Duration // mean time between throttle episodes; 0 = none
	ThrottleFor      time.Duration // length of one episode
	ThrottleSlowdown float64       // extra step time while throttled (0.15 = 15% slower)
}

// DefaultNoise is a well-kept datacenter card: cards of one model within a
// few percent of each other, a clock state that moves by about 1% every few
// minutes, 1% drift per hour and a rare short throttle.
func DefaultNoise() Noise {
	return Noise{
		CardCV:           0.03,
		SessionCV:        0.01,
		SessionEvery:     2 * time.Minute,
		DriftPerHour:     0.01,
		ThrottleEvery:    30 * time.Minute,
		ThrottleFor:      3 * time.Second,
		ThrottleSlowdown: 0.15,
	}
}

func (n Noise) validate() []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"card cv", n.CardCV}, {"session cv", n.SessionCV}, {"throttle slowdown", n.ThrottleSlowdown}} {
		if f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("%s is %g: must be in [0, 1]", f.name, f.v))
		}
	}
	if math.Abs(n.DriftPerHour) > 1 {
		errs = append(errs, fmt.Errorf("drift per hour is %g: must be in [-1, 1]", n.DriftPerHour))
	}
	if n.SessionEvery < 0 || n.ThrottleEvery < 0 || n.ThrottleFor < 0 {
		errs = append(errs, fmt.Errorf("session every %v, throttle every %v, throttle for %v: durations must be >= 0", n.SessionEvery, n.ThrottleEvery, n.ThrottleFor))
	}
	if n.ThrottleEvery > 0 && n.ThrottleFor == 0 {
		errs = append(errs, fmt.Errorf("throttle every is %v but throttle for is 0: give episodes a length or set throttle every to 0", n.ThrottleEvery))
	}
	return errs
}

// sessionRho is how much of the last clock state a new one keeps (log
// space), so the state wanders rather than jumps between unrelated levels.
const sessionRho = 0.5

// Distinct PCG streams keep each source of randomness independent of how
// many draws the others make.
const (
	streamJitter = iota + 1
	streamErrors
	streamSession
	streamThrottle
	streamCard
)

// noiseModel turns time since engine start into a speed multiplier. The
// scheduler asks with non-decreasing times; the random schedule of clock
// states and throttles is drawn as time reaches it, so it is a fixed
// function of the seed.
type noiseModel struct {
	n    Noise
	card float64

	srng       *rand.Rand
	level      float64 // log clock state
	clockMul   float64 // exp(level)
	nextChange time.Duration

	trng          *rand.Rand
	throttleStart time.Duration // current or next episode
}

func newNoiseModel(n Noise, seed int64) *noiseModel {
	inst := n.InstanceSeed
	if inst == 0 {
		inst = seed
	}
	m := &noiseModel{
		n:    n,
		card: math.Exp(n.CardCV * rand.New(rand.NewPCG(uint64(inst), streamCard)).NormFloat64()),
		srng: rand.New(rand.NewPCG(uint64(seed), streamSession)),
		trng: rand.New(rand.NewPCG(uint64(seed), streamThrottle)),
	}
	m.level = n.SessionCV * m.srng.NormFloat64()
	m.clockMul = math.Exp(m.level)
	m.nextChange = m.draw(m.srng, n.SessionEvery)
	m.throttleStart = m.draw(m.trng, n.ThrottleEvery)
	return m
}

// draw returns an exponential wait with the given mean, or "never" for 0.
func (m *noiseModel) draw(r *rand.Rand, mean time.Duration) time.Duration {
	if mean <= 0 {
		return math.MaxInt64
	}
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// factor is the multiplier of a step that starts t after engine start.
func (m *noiseModel) factor(t time.Duration) float64 {
	return m.card * m.clock(t) * m.throttle(t) * m.drift(t)
}

// clock is the run-level state at t: an AR(1) walk in log space whose
// stationary std-dev is SessionCV, stepping at exponential intervals.
func (m *noiseModel) clock(t time.Duration) float64 {
	for t >= m.nextChange {
		m.level = sessionRho*m.level + math.Sqrt(1-sessionRho*sessionRho)*m.n.SessionCV*m.srng.NormFloat64()
		m.nextChange += m.draw(m.srng, m.n.SessionEvery)
		m.clockMul = math.Exp(m.level)
	}
	return m.clockMul
}

// throttle is 1+ThrottleSlowdown inside an episode, else 1. Episodes do not
// overlap: the next one is drawn from the end of the last.
func (m *noiseModel) throttle(t time.Duration) float64 {
	if m.n.ThrottleEvery <= 0 {
		return 1
	}
	for t >= m.throttleStart+m.n.ThrottleFor {
		m.throttleStart += m.n.ThrottleFor + m.draw(m.trng, m.n.ThrottleEvery)
	}
	if t >= m.throttleStart {
		return 1 + m.n.ThrottleSlowdown
	}
	return 1
}

func (m *noiseModel) drift(t time.Duration) float64 {
	if m.n.DriftPerHour == 0 {
		return 1
	}
	return math.Max(0.05, 1+m.n.DriftPerHour*t.Hours())
}
