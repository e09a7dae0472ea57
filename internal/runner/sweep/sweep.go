// Package sweep runs a capacity sweep against a running engine: the pure
// capacity.Sweep picks each rate, the benchmark client offers it (constant
// or Poisson arrivals) and its result becomes the step the sweep judges.
// It is the runner agent's half of the capacity tier.
package sweep

import (
	"context"
	"fmt"
	"math"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Arrival processes a step may offer.
const (
	Constant = "constant"
	Poisson  = "poisson"
)

// Defaults of Options.
const (
	DefaultStepSeconds = 20
	DefaultMinPrompts  = 40
)

// Options say how each step is offered.
type Options struct {
	// Bench is the template of every step: target, model, dataset and
	// lengths, seed. Its NumPrompts, RequestRate, Burstiness and Goodput
	// are set per step.
	Bench bench.Options
	// Arrivals is Constant (default) or Poisson.
	Arrivals string
	// StepSeconds is how long a step offers its rate: it sends
	// rate·StepSeconds requests, at least MinPrompts.
	StepSeconds float64
	MinPrompts  int
	// Run offers one step; nil is bench.Run.
	Run func(context.Context, bench.Options) (*result.Result, error)
	Log zerolog.Logger
}

// Run drives s until it is done (or ctx ends) and returns its knee.
func Run(ctx context.Context, s *capacity.Sweep, o Options) (capacity.Knee, error) {
	o, err := o.withDefaults()
	if err != nil {
		return capacity.Knee{}, err
	}
	for {
		rate, ok := s.Next()
		if !ok {
			return s.Knee(), nil
		}
		st, err := Step(ctx, rate, s.SLO, o)
		if err != nil {
			return s.Knee(), err
		}
		if err := s.Observe(st); err != nil {
			return s.Knee(), fmt.Errorf("capacity step at %g requests/s: %w", rate, err)
		}
		j := s.Steps[len(s.Steps)-1]
		o.Log.Info().Float64("rate", rate).Str("arrivals", o.Arrivals).Int("sent", st.Sent).Int("good", st.Good).
			Int("failed", st.Failed).Float64("throughput", st.Throughput).Float64("ttft_p99_ms", st.TTFTp99ms).
			Bool("sustained", j.Sustained).Msg("capacity step")
	}
}

// withDefaults fills what is left at zero and checks the arrivals.
func (o Options) withDefaults() (Options, error) {
	if o.Run == nil {
		o.Run = bench.Run
	}
	if o.Arrivals == "" {
		o.Arrivals = Constant
	}
	if o.Arrivals != Constant && o.Arrivals != Poisson {
		return o, fmt.Errorf("capacity arrivals %q: use %s or %s", o.Arrivals, Constant, Poisson)
	}
	if o.StepSeconds <= 0 {
		o.StepSeconds = DefaultStepSeconds
	}
	if o.MinPrompts <= 0 {
		o.MinPrompts = DefaultMinPrompts
	}
	return o, nil
}

// Step offers one rate and measures it against slo.
func Step(ctx context.Context, rate float64, slo capacity.SLO, o Options) (capacity.Step, error) {
	o, err := o.withDefaults()
	if err != nil {
		return capacity.Step{}, err
	}
	bo := o.Bench
	bo.NumPrompts = max(o.MinPrompts, int(math.Ceil(rate*o.StepSeconds)))
	bo.RequestRate = result.Rate(rate)
	bo.Burstiness = 1
	if o.Arrivals == Constant {
		bo.Burstiness = math.Inf(1)
	}
	bo.Goodput = slo.Goodput()
	// Past the knee requests fail by design; the step counts them, the
	// client's own error-rate guard must not refuse the run.
	bo.MaxErrorRate = 1
	r, err := o.Run(ctx, bo)
	if err != nil {
		return capacity.Step{}, fmt.Errorf("capacity step at %g requests/s: %w", rate, err)
	}
	return FromResult(rate, o.Arrivals, r), nil
}

// FromResult turns one benchmark result into a capacity step.
func FromResult(rate float64, arrivals string, r *result.Result) capacity.Step {
	st := capacity.Step{
		Rate: rate, Arrivals: arrivals,
		Sent: r.Completed + r.Failed, Failed: r.Failed,
		Throughput:  r.RequestThroughput,
		TTFTp50ms:   r.Metrics["median_ttft_ms"],
		TTFTp99ms:   r.Metrics["p99_ttft_ms"],
		TPOTp50ms:   r.Metrics["median_tpot_ms"],
		E2ELp50ms:   r.Metrics["median_e2el_ms"],
		Preemptions: -1,
	}
	if r.RequestGoodput != nil {
		st.Good = int(math.Round(*r.RequestGoodput * r.Duration))
	}
	if r.Perfgate != nil && r.Perfgate.Client != nil {
		st.Achieved = r.Perfgate.Client.AchievedRate
		if r.Perfgate.Client.ClientBound {
			st.Distorted = r.Perfgate.Client.Reason
		}
	}
	if r.Perfgate != nil && r.Perfgate.ServerMetrics != nil && r.Perfgate.ServerMetrics.Preemptions != nil {
		st.Preemptions = *r.Perfgate.ServerMetrics.Preemptions
	}
	return st
}
