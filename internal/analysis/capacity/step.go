package capacity

import (
	"errors"
	"fmt"
)

// Defaults of an SLO.
const (
	// DefaultMinGoodFraction: a rate is sustained when 95% of its requests
	// meet every SLO, the share an SLO of "p95 under X" promises.
	DefaultMinGoodFraction = 0.95
	// DefaultMaxErrorRate: more failures than this and the rate is not
	// sustained, whatever the latencies of the ones that finished.
	DefaultMaxErrorRate = 0.01
)

// SLO is what a request must meet to count as good, in ms (0: not
// required), and the share of good requests a sustained rate needs.
type SLO struct {
	TTFTms          float64 `json:"ttft_ms,omitempty" yaml:"ttft_ms"`
	TPOTms          float64 `json:"tpot_ms,omitempty" yaml:"tpot_ms"`
	E2ELms          float64 `json:"e2el_ms,omitempty" yaml:"e2el_ms"`
	MinGoodFraction float64 `json:"min_good_fraction,omitempty" yaml:"min_good_fraction"`
	MaxErrorRate    float64 `json:"max_error_rate,omitempty" yaml:"max_error_rate"`
}

// WithDefaults fills the shares left at zero.
func (s SLO) WithDefaults() SLO {
	if s.MinGoodFraction == 0 {
		s.MinGoodFraction = DefaultMinGoodFraction
	}
	if s.MaxErrorRate == 0 {
		s.MaxErrorRate = DefaultMaxErrorRate
	}
	return s
}

// Validate says what to fix.
func (s SLO) Validate() error {
	var errs []error
	if s.TTFTms <= 0 && s.TPOTms <= 0 && s.E2ELms <= 0 {
		errs = append(errs, errors.New("capacity slo: set at least one of ttft_ms, tpot_ms, e2el_ms"))
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"ttft_ms", s.TTFTms}, {"tpot_ms", s.TPOTms}, {"e2el_ms", s.E2ELms}} {
		if v.v < 0 {
			errs = append(errs, fmt.Errorf("capacity slo: %s is %g: must be >= 0", v.name, v.v))
		}
	}
	if s.MinGoodFraction < 0 || s.MinGoodFraction > 1 {
		errs = append(errs, fmt.Errorf("capacity slo: min_good_fraction is %g: must be in (0, 1]", s.MinGoodFraction))
	}
	if s.MaxErrorRate < 0 || s.MaxErrorRate > 1 {
		errs = append(errs, fmt.Errorf("capacity slo: max_error_rate is %g: must be in [0, 1]", s.MaxErrorRate))
	}
	return errors.Join(errs...)
}

// Goodput is the SLO as the benchmark client's goodput map ("ttft",
// "tpot", "e2el" in ms).
func (s SLO) Goodput() map[string]float64 {
	m := map[string]float64{}
	if s.TTFTms > 0 {
		m["ttft"] = s.TTFTms
	}
	if s.TPOTms > 0 {
		m["tpot"] = s.TPOTms
	}
	if s.E2ELms > 0 {
		m["e2el"] = s.E2ELms
	}
	return m
}

// Step is one offered rate's measurement: what was sent, what came back
// good, and the latencies the curve draws.
type Step struct {
	Rate     float64 `json:"rate"`     // offered, requests/s
	Arrivals string  `json:"arrivals"` // "constant" or "poisson"
	Sent     int     `json:"sent"`
	Good     int     `json:"good"` // within every SLO
	Failed   int     `json:"failed"`
	// Throughput is completed requests per second of the run, drain
	// included: past the knee it stays below the offered rate.
	Throughput float64 `json:"throughput"`
	TTFTp50ms  float64 `json:"ttft_p50_ms"`
	TTFTp99ms  float64 `json:"ttft_p99_ms"`
	TPOTp50ms  float64 `json:"tpot_p50_ms"`
	E2ELp50ms  float64 `json:"e2el_p50_ms"`
	// Preemptions the engine reported during the step (its /metrics), -1
	// when it reports none.
	Preemptions float64 `json:"preemptions"`
	// Distorted is why the host, not the engine, may have shaped the
	// step: the benchmark client's self-check found it sent or read late
	// (CPU starvation). A step that failed its SLO so, or was offered
	// short of its rate, judges nothing and is measured again (see
	// Sweep.Observe); one the engine sustained at its full rate anyway
	// stands.
	Distorted string `json:"distorted,omitempty"`
	// Achieved is the rate the client really sent at (0: unknown).
	Achieved float64 `json:"achieved,omitempty"`
}

// GoodFraction is the share of sent requests that met every SLO.
func (st Step) GoodFraction() float64 {
	if st.Sent == 0 {
		return 0
	}
	return float64(st.Good) / float64(st.Sent)
}

// ErrorRate is the share of sent requests that failed.
func (st Step) ErrorRate() float64 {
	if st.Sent == 0 {
		return 1
	}
	return float64(st.Failed) / float64(st.Sent)
}

// Sustained judges a step against s (defaults filled): enough good
// requests and few failures. A step that sent nothing is not sustained.
func (s SLO) Sustained(st Step) bool {
	s = s.WithDefaults()
	return st.Sent > 0 && st.GoodFraction() >= s.MinGoodFraction && st.ErrorRate() <= s.MaxErrorRate
}
