package capacity

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Defaults of a Plan.
const (
	// DefaultResolution: the bisection stops once the bracket's top is
	// within 10% of its bottom, finer than a sweep's run-to-run noise.
	DefaultResolution = 0.10
	// DefaultMaxSteps bounds a sweep, fixed rates and bisection together.
	DefaultMaxSteps = 12
	// Remeasures is how often a step the host distorted (the benchmark
	// client's self-check failed: it sent or read late) is measured again
	// before the sweep stops and says it cannot tell.
	Remeasures = 2
)

// DefaultRates are the fixed rates (requests/s) a sweep starts with.
var DefaultRates = []float64{1, 2, 4, 8, 16, 32}

// ErrStale: an observation for a rate that is not the pending one (a
// redelivered result). Callers ignore it.
var ErrStale = errors.New("capacity: not the pending rate")

// Plan says which rates a sweep tries.
type Plan struct {
	// Rates are the fixed rates, tried from low to high until one is not
	// sustained; the bisection then runs between it and the one before.
	Rates []float64 `json:"rates" yaml:"rates"`
	// Resolution is the bracket's relative width at which the bisection
	// stops: top <= bottom·(1+Resolution).
	Resolution float64 `json:"resolution" yaml:"resolution"`
	// MaxSteps caps the steps of one sweep.
	MaxSteps int `json:"max_steps" yaml:"max_steps"`
}

// WithDefaults fills what is left at zero.
func (p Plan) WithDefaults() Plan {
	if len(p.Rates) == 0 {
		p.Rates = slices.Clone(DefaultRates)
	}
	if p.Resolution == 0 {
		p.Resolution = DefaultResolution
	}
	if p.MaxSteps == 0 {
		p.MaxSteps = DefaultMaxSteps
	}
	return p
}

// Validate says what to fix.
func (p Plan) Validate() error {
	var errs []error
	for i, r := range p.Rates {
		if !(r > 0) || math.IsInf(r, 1) {
			errs = append(errs, fmt.Errorf("capacity rates[%d] is %g: must be a finite rate > 0 requests/s", i, r))
		}
		if i > 0 && r <= p.Rates[i-1] {
			errs = append(errs, fmt.Errorf("capacity rates must rise: %g follows %g", r, p.Rates[i-1]))
		}
	}
	if !(p.Resolution > 0) || p.Resolution > 1 {
		errs = append(errs, fmt.Errorf("capacity resolution is %g: must be in (0, 1] (0.1 = stop at a 10%% bracket)", p.Resolution))
	}
	if p.MaxSteps < len(p.Rates) {
		errs = append(errs, fmt.Errorf("capacity max_steps is %d: must be at least the %d fixed rates", p.MaxSteps, len(p.Rates)))
	}
	return errors.Join(errs...)
}

// Sweep is one commit's search for its knee. It is plain JSON.
type Sweep struct {
	Plan  Plan     `json:"plan"`
	SLO   SLO      `json:"slo"`
	Steps []Judged `json:"steps"` // in the order measured
}

// Judged is a step and the SLO's judgement of it.
type Judged struct {
	Step
	Sustained bool `json:"sustained"`
}

// NewSweep starts a sweep; plan and slo get their defaults.
func NewSweep(plan Plan, slo SLO) (*Sweep, error) {
	plan, slo = plan.WithDefaults(), slo.WithDefaults()
	if err := errors.Join(plan.Validate(), slo.Validate()); err != nil {
		return nil, err
	}
	return &Sweep{Plan: plan, SLO: slo}, nil
}

// Next is the rate to measure next, or ok false when the sweep is done.
func (s *Sweep) Next() (rate float64, ok bool) {
	if len(s.Steps) >= s.Plan.MaxSteps+Remeasures || s.distorted() != "" {
		return 0, false
	}
	if n := len(s.Steps); n > 0 && s.Steps[n-1].Distorted != "" {
		return s.Steps[n-1].Rate, true // measure the distorted rate again
	}
	if s.measured() >= s.Plan.MaxSteps {
		return 0, false
	}
	lo, hi := s.bracket()
	if hi == 0 {
		// Everything so far was sustained: the next fixed rate above.
		for _, r := range s.Plan.Rates {
			if r > lo {
				return r, true
			}
		}
		return 0, false // sustained at the top rate: the knee is above the plan
	}
	if lo == 0 {
		// Not even the lowest rate: halve until one is, but not below a
		// tenth of the lowest fixed rate, where the answer is "about none".
		if hi <= s.Plan.Rates[0]/10 {
			return 0, false
		}
		return round3(hi / 2), true
	}
	if hi <= lo*(1+s.Plan.Resolution) {
		return 0, false
	}
	mid := round3(math.Sqrt(lo * hi)) // rates span decades: bisect the log
	if mid <= lo || mid >= hi {
		return 0, false
	}
	return mid, true
}

// Observe records the pending rate's step. A step for another rate is
// ErrStale.
func (s *Sweep) Observe(st Step) error {
	want, ok := s.Next()
	if !ok || st.Rate != want {
		return fmt.Errorf("%w: got %g requests/s, want %g", ErrStale, st.Rate, want)
	}
	sustained := s.SLO.Sustained(st)
	if st.Distorted != "" && sustained && (st.Achieved == 0 || st.Achieved >= fullRate*st.Rate) {
		// The host made the step harder, and the engine met its SLO at
		// the full rate anyway: that is the engine's answer.
		st.Distorted = ""
	}
	s.Steps = append(s.Steps, Judged{Step: st, Sustained: st.Distorted == "" && sustained})
	return nil
}

// fullRate is the share of its rate a step must have been offered at for
// a sustained step to count though the client ran late.
const fullRate = 0.95

// measured counts the steps that measured the engine, not the host.
func (s *Sweep) measured() int {
	n := 0
	for _, j := range s.Steps {
		if j.Distorted == "" {
			n++
		}
	}
	return n
}

// distorted is why the sweep cannot tell: a rate whose every try, the
// first and Remeasures more, the host distorted; "" otherwise.
func (s *Sweep) distorted() string {
	run := 0
	for i, j := range s.Steps {
		if j.Distorted == "" || (i > 0 && s.Steps[i-1].Rate != j.Rate) {
			run = 0
		}
		if j.Distorted != "" {
			run++
			if run > Remeasures {
				return fmt.Sprintf("the host distorted every one of %d tries at %g requests/s (%s)", run, j.Rate, j.Distorted)
			}
		}
	}
	return ""
}

// Knee is what a sweep found: the highest rate sustained below the lowest
// rate that was not.
type Knee struct {
	Rate float64 `json:"rate"` // sustainable rate, requests/s; 0: none measured was
	// Below is the lowest rate not sustained; 0 when every rate was
	// (Censored: the knee is at Rate or above).
	Below    float64 `json:"below"`
	Censored bool    `json:"censored,omitempty"`
	Steps    int     `json:"steps"`
	// Distorted, when set, says why the sweep cannot tell where its knee
	// is: a rate the host kept distorting (a CPU-starved client sends and
	// reads late, which reads as the engine failing its SLO).
	Distorted string `json:"distorted,omitempty"`
}

// Knee reports the bracket found so far.
func (s *Sweep) Knee() Knee {
	lo, hi := s.bracket()
	return Knee{Rate: lo, Below: hi, Censored: hi == 0, Steps: len(s.Steps), Distorted: s.distorted()}
}

// bracket is (highest sustained rate below hi, lowest rate not
// sustained); hi is 0 when every step was sustained. A rate sustained
// above a failed one (noise near the knee) does not move the bracket up:
// the first failure bounds what the engine can be trusted with.
func (s *Sweep) bracket() (lo, hi float64) {
	for _, j := range s.Steps {
		if !j.Sustained && j.Distorted == "" && (hi == 0 || j.Rate < hi) {
			hi = j.Rate
		}
	}
	for _, j := range s.Steps {
		if j.Sustained && j.Rate > lo && (hi == 0 || j.Rate < hi) {
			lo = j.Rate
		}
	}
	return lo, hi
}

// round3 keeps three significant digits, so a rate reads as 5.66, not
// 5.656854.
func round3(x float64) float64 {
	if x <= 0 {
		return x
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(x)))
	return math.Round(x*p) / p
}
