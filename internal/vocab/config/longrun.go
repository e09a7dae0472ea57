package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
)

// Capacity is the `capacity:` section: the capacity tier, which sweeps
// base and head to the highest request rate that still meets the SLO (the
// knee) and gates head's knee against base's as the `perfgate / capacity`
// check. Unset (the default) there is no capacity tier; `/perf capacity`
// says so.
type Capacity struct {
	// Rates are the fixed rates (requests/s) a sweep tries before it
	// bisects; Resolution is where the bisection stops (0.1: a 10%
	// bracket); MaxSteps caps one sweep.
	Rates      []float64 `yaml:"rates"`
	Resolution float64   `yaml:"resolution"`
	MaxSteps   int       `yaml:"max_steps"`
	// SLO is what a good request meets; a rate is sustained when
	// min_good_fraction of its requests are good.
	SLO capacity.SLO `yaml:"slo"`
	// Arrivals is constant or poisson.
	Arrivals string `yaml:"arrivals"`
	// Step is how long each rate is offered; a step sends at least
	// MinPrompts requests.
	Step       Duration `yaml:"step"`
	MinPrompts int      `yaml:"min_prompts"`
	// Sweeps per commit (ABBA): repeats give the comparison its spread.
	Sweeps int `yaml:"sweeps"`
	// Interleave is how base and head share the card: "sweeps" (the
	// default) sweeps one commit, then the other, one engine at a time;
	// "steps" keeps both engines up and alternates them rate by rate
	// (ABBA by step), so a host that slows down mid-sweep slows both
	// sides alike — it needs both engines to fit on the card at once.
	Interleave string `yaml:"interleave"`
	// Threshold is the relative drop of the sustainable rate beyond the
	// sweeps' spread that is a regression.
	Threshold Percent `yaml:"threshold"`
	// Nightly also sweeps the default branch's head each night.
	Nightly bool `yaml:"nightly"`

	// On is set when the file has a capacity section.
	On bool `yaml:"-"`
}

// Soak is the `soak:` section: the soak tier, a long steady load on the
// head's engine while the runner samples its memory, cache and latency,
// judged by trends (a leak, hit-rate drift, latency creep) as the
// `perfgate / soak` check. Unset there is no soak tier.
type Soak struct {
	Duration Duration `yaml:"duration"`
	// Window is the sampling interval (0: the runner's, a thirtieth of
	// the duration).
	Window Duration `yaml:"window"`
	// Rate is the steady load in requests/s.
	Rate       float64         `yaml:"rate"`
	Thresholds soak.Thresholds `yaml:"thresholds"`
	Nightly    bool            `yaml:"nightly"`

	On bool `yaml:"-"`
}

// Long-run defaults.
const (
	DefaultCapacityStep   = 20 * time.Second
	DefaultCapacitySweeps = 2
	DefaultSoakDuration   = 2 * time.Hour
	// maxSoak bounds a soak to what a runner's lease can hold.
	maxSoak = 24 * time.Hour
)

// How a capacity job interleaves base and head (Capacity.Interleave).
const (
	InterleaveSweeps = "sweeps"
	InterleaveSteps  = "steps"
)

func defaultCapacity() Capacity {
	return Capacity{Arrivals: "constant", Step: Duration(DefaultCapacityStep), MinPrompts: 40, Sweeps: DefaultCapacitySweeps, Threshold: 0.10, Interleave: InterleaveSweeps}
}

func defaultSoak() Soak {
	return Soak{Duration: Duration(DefaultSoakDuration), Rate: 5, Thresholds: soak.DefaultThresholds()}
}

// validateLongRun checks the capacity and soak sections the file wrote.
func (d *decoder) validateLongRun(c *Config) {
	if c.Capacity.On {
		cp := c.Capacity
		sweep := capacity.Plan{Rates: cp.Rates, Resolution: cp.Resolution, MaxSteps: cp.MaxSteps}.WithDefaults()
		d.problems("capacity", sweep.Validate(), "rates rise, e.g. [1, 2, 4, 8, 16, 32]; resolution in (0, 1]")
		if !d.set["capacity.slo"] {
			d.errField("capacity.slo", "no SLO: the knee is the highest rate that meets one", "set capacity.slo.ttft_ms (or tpot_ms, e2el_ms), e.g. ttft_ms: 500")
		} else {
			d.problems("capacity.slo", cp.SLO.WithDefaults().Validate(), "")
		}
		d.oneOf("capacity.arrivals", cp.Arrivals, []string{"constant", "poisson"})
		d.oneOf("capacity.interleave", cp.Interleave, []string{InterleaveSweeps, InterleaveSteps})
		if cp.Step.D() < time.Second {
			d.errField("capacity.step", fmt.Sprintf("a step of %s", cp.Step.D()), "offer each rate for at least 1s, e.g. 20s")
		}
		if cp.MinPrompts < 1 {
			d.errField("capacity.min_prompts", fmt.Sprintf("%d prompts a step", cp.MinPrompts), "at least 1, e.g. 40")
		}
		if cp.Sweeps < 1 || cp.Sweeps > 8 {
			d.errField("capacity.sweeps", fmt.Sprintf("%d sweeps", cp.Sweeps), "1 to 8 sweeps a commit (2 gives the comparison a spread)")
		}
		if cp.Threshold <= 0 || cp.Threshold >= 1 {
			d.errField("capacity.threshold", fmt.Sprintf("%g", float64(cp.Threshold)), "a relative drop such as 10%")
		}
	}
	if c.Soak.On {
		s := c.Soak
		if s.Duration.D() < time.Second || s.Duration.D() > maxSoak {
			d.errField("soak.duration", fmt.Sprintf("a soak of %s", s.Duration.D()), "between 1s and 24h, e.g. 2h")
		}
		if s.Window.D() < 0 || s.Window.D() > s.Duration.D()/2 {
			d.errField("soak.window", fmt.Sprintf("a window of %s in a %s soak", s.Window.D(), s.Duration.D()), "sample at least twice a soak (0: a thirtieth of the duration)")
		}
		if !(s.Rate > 0) {
			d.errField("soak.rate", fmt.Sprintf("%g requests/s", s.Rate), "a steady load above 0, e.g. 5")
		}
		d.problems("soak.thresholds", s.Thresholds.Validate(), "")
	}
}

// problems reports each of a joined error's lines as an error of field.
func (d *decoder) problems(field string, err error, hint string) {
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		d.errField(field, line, hint)
	}
}
