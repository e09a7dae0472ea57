package fleet

import (
	"math/rand/v2"
	"time"
)

// Default run times by tier, used until the fleet has finished jobs of a
// tier to learn from.
var defaultDurations = map[string]time.Duration{
	"quick":   10 * time.Minute,
	"merge":   30 * time.Minute,
	"nightly": 60 * time.Minute,
}

// DefaultDuration is the run time assumed for a tier with no history.
func DefaultDuration(tier string) time.Duration {
	if d, ok := defaultDurations[tier]; ok {
		return d
	}
	return 20 * time.Minute
}

// Sample is one finished attempt: its tier, pool and GPU time.
type Sample struct {
	Tier, Pool string
	Took       time.Duration
}

// Durations are the service times the queue estimate expects, learnt
// from recent finished attempts: the mean (not the median: run times have
// a long tail, and a queue waits on their sum) of the most recent
// ServiceWindow of the tier in the pool when there are at least
// minPoolSamples of them, else of the tier, else the tier's default.
// Nothing is rounded up: a two-minute job counts two minutes.
type Durations struct {
	byPool map[[2]string][]time.Duration
	byTier map[string][]time.Duration
}

// RecentWindow is how many recent attempts of a tier the store's
// fair-share charge averages.
const RecentWindow = 20

// ServiceWindow is how many recent attempts per tier and pool the queue
// estimate learns from.
const ServiceWindow = 50

// minPoolSamples is how many attempts of a tier in a pool it takes to
// prefer them to the tier's.
const minPoolSamples = 5

// NewDurations learns from samples given newest first.
func NewDurations(samples []Sample) Durations {
	d := Durations{byPool: map[[2]string][]time.Duration{}, byTier: map[string][]time.Duration{}}
	for _, s := range samples {
		if s.Took <= 0 {
			continue
		}
		k := [2]string{s.Tier, s.Pool}
		if len(d.byPool[k]) < ServiceWindow {
			d.byPool[k] = append(d.byPool[k], s.Took)
		}
		if len(d.byTier[s.Tier]) < ServiceWindow {
			d.byTier[s.Tier] = append(d.byTier[s.Tier], s.Took)
		}
	}
	return d
}

// samples are the run times a job of tier in pool is expected from; nil:
// none, the default holds.
func (d Durations) samples(tier, pool string) []time.Duration {
	if v := d.byPool[[2]string{tier, pool}]; len(v) >= minPoolSamples {
		return v
	}
	if v := d.byTier[tier]; len(v) > 0 {
		return v
	}
	return d.byPool[[2]string{tier, pool}]
}

// Of is the expected run time of a job of tier in pool.
func (d Durations) Of(tier, pool string) time.Duration {
	v := d.samples(tier, pool)
	if len(v) == 0 {
		return DefaultDuration(tier)
	}
	var sum time.Duration
	for _, x := range v {
		sum += x
	}
	return sum / time.Duration(len(v))
}

// Draw is a run time of a job of tier in pool drawn from the recent ones
// (an exponential around the tier's default when there are none).
func (d Durations) Draw(rng *rand.Rand, tier, pool string) time.Duration {
	v := d.samples(tier, pool)
	if len(v) == 0 {
		return time.Duration(rng.ExpFloat64() * float64(DefaultDuration(tier)))
	}
	return v[rng.IntN(len(v))]
}

// DrawLeft is how much longer a job of tier in pool that has run for ran
// runs, drawn from the recent run times longer than ran; one that has
// outrun them all ends within a fifth of the typical run time.
func (d Durations) DrawLeft(rng *rand.Rand, tier, pool string, ran time.Duration) time.Duration {
	v := d.samples(tier, pool)
	if len(v) == 0 {
		mean := float64(DefaultDuration(tier))
		if float64(ran) < mean {
			// Memoryless: what is left is as long as a whole run.
			return time.Duration(rng.ExpFloat64() * mean)
		}
		return time.Duration(rng.Float64() * mean / 5)
	}
	n := 0
	for _, x := range v {
		if x > ran {
			n++
		}
	}
	if n == 0 {
		return time.Duration(rng.Float64() * float64(d.Of(tier, pool)) / 5)
	}
	k := rng.IntN(n)
	for _, x := range v {
		if x > ran {
			if k == 0 {
				return x - ran
			}
			k--
		}
	}
	return 0
}
