package agentapi

import (
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Job kinds of the long-run tiers.
const (
	// KindCapacity: sweep each commit's request rate to its knee
	// (CapacityPlan); artifacts capacity-<n>.json, one per sweep.
	KindCapacity = "capacity"
	// KindSoak: keep a steady load on the head's engine for a long time
	// and sample its memory, cache and latency (SoakPlan); artifact
	// soak.json.
	KindSoak = "soak"
)

// Artifact names of the long-run tiers.
const (
	CapacityArtifactPrefix = "capacity-"
	SoakArtifact           = "soak.json"
)

// CapacityPlan makes a job a capacity sweep: for each commit (base and
// head, Sweeps times each in ABBA order), the agent starts the engine, and
// the sweep offers rates from Sweep.Rates up, then bisects, until it
// brackets the highest rate that meets SLO.
type CapacityPlan struct {
	Sweep capacity.Plan `json:"sweep"`
	SLO   capacity.SLO  `json:"slo"`
	// Arrivals is "constant" (default) or "poisson".
	Arrivals string `json:"arrivals,omitempty"`
	// StepSeconds is how long each rate is offered (0: 20 s); a step
	// sends at least MinPrompts requests (0: 40).
	StepSeconds float64 `json:"step_seconds,omitempty"`
	MinPrompts  int     `json:"min_prompts,omitempty"`
	// Sweeps per commit (0: 1): repeats give the comparison its spread.
	Sweeps int `json:"sweeps,omitempty"`
	// Threshold is the server's: the relative change of the sustainable
	// rate below which base and head are the same (0: 10%).
	Threshold float64 `json:"threshold,omitempty"`
	// Steps keeps both engines up and alternates base and head rate by
	// rate (config capacity.interleave: steps).
	Steps bool `json:"steps,omitempty"`
}

// CapacitySweep is one sweep's artifact.
type CapacitySweep struct {
	Side  string          `json:"side"`
	SHA   string          `json:"sha"`
	Sweep *capacity.Sweep `json:"sweep"`
	Knee  capacity.Knee   `json:"knee"`
}

// SoakPlan makes a job a soak of the head commit: Rate requests/s of the
// workload for Duration, sampled every Window, judged by Thresholds.
type SoakPlan struct {
	Duration   Duration        `json:"duration"`
	Window     Duration        `json:"window,omitempty"`
	Rate       float64         `json:"rate,omitempty"`
	Thresholds soak.Thresholds `json:"thresholds"`
}

// SoakRun is a soak's artifact.
type SoakRun struct {
	SHA     string        `json:"sha"`
	Samples []soak.Sample `json:"samples"`
	Report  soak.Report   `json:"report"`
}

// CapacitySides is the order a capacity plan's sweeps run in: base and
// head alternating ABBA, or the head alone without a base.
func (p Plan) CapacitySides() []string {
	n := 1
	if p.Capacity != nil && p.Capacity.Sweeps > 0 {
		n = p.Capacity.Sweeps
	}
	if p.BaseSHA == "" || p.BaseSHA == p.HeadSHA {
		out := make([]string, n)
		for i := range out {
			out[i] = SideHead
		}
		return out
	}
	var out []string
	for i := range n {
		if i%2 == 0 {
			out = append(out, SideBase, SideHead)
		} else {
			out = append(out, SideHead, SideBase)
		}
	}
	return out
}

// validateLongRun checks the capacity and soak parts of a plan.
func (p Plan) validateLongRun() []error {
	var errs []error
	if c := p.Capacity; c != nil {
		if err := c.Sweep.WithDefaults().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("plan capacity: %w", err))
		}
		if err := c.SLO.WithDefaults().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("plan capacity: %w", err))
		}
		if c.Arrivals != "" && c.Arrivals != "constant" && c.Arrivals != "poisson" {
			errs = append(errs, fmt.Errorf("plan capacity arrivals %q: want constant or poisson", c.Arrivals))
		}
		if c.Sweeps < 0 || c.Sweeps > 8 {
			errs = append(errs, fmt.Errorf("plan capacity sweeps is %d: must be in [0, 8]", c.Sweeps))
		}
		if c.StepSeconds < 0 || c.MinPrompts < 0 {
			errs = append(errs, errors.New("plan capacity step_seconds and min_prompts must be >= 0"))
		}
	}
	if s := p.Soak; s != nil {
		if s.Duration.D() <= 0 || s.Window.D() < 0 || s.Rate < 0 {
			errs = append(errs, fmt.Errorf("plan soak: duration %s must be > 0, window and rate >= 0", s.Duration.D()))
		}
		if err := s.Thresholds.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("plan soak: %w", err))
		}
	}
	if p.Capacity != nil && p.Soak != nil || (p.Capacity != nil || p.Soak != nil) && p.Profile != nil {
		errs = append(errs, errors.New("plan: capacity, soak and profile are different jobs: set one"))
	}
	return errs
}

// LongRunPlanAt is the plan of a capacity or soak job (kind) from a
// repository's config: the engine and workload as the quick tier has them,
// the sweep or soak from the config's capacity: or soak: section. A
// capacity plan sweeps base and head (head alone when they are the same
// commit); a soak runs the head.
func LongRunPlanAt(cfg *config.Config, kind string, c Commits) (Plan, error) {
	p, err := PlanFromConfig(cfg, "quick")
	if err != nil {
		return Plan{}, err
	}
	p.Tier, p.Repo, p.HeadSHA = kind, c.Repo, c.Head
	switch kind {
	case KindCapacity:
		cp := cfg.Capacity
		if !cp.On {
			return Plan{}, errors.New("plan: the config has no capacity: section")
		}
		p.BaseSHA = c.Base
		if p.BaseSHA == p.HeadSHA {
			p.BaseSHA = ""
		}
		p.Capacity = &CapacityPlan{
			Sweep: capacity.Plan{Rates: cp.Rates, Resolution: cp.Resolution, MaxSteps: cp.MaxSteps},
			SLO:   cp.SLO, Arrivals: cp.Arrivals, StepSeconds: cp.Step.D().Seconds(), MinPrompts: cp.MinPrompts,
			Sweeps: cp.Sweeps, Threshold: float64(cp.Threshold), Steps: cp.Interleave == config.InterleaveSteps,
		}
	case KindSoak:
		sk := cfg.Soak
		if !sk.On {
			return Plan{}, errors.New("plan: the config has no soak: section")
		}
		p.Soak = &SoakPlan{Duration: Duration(sk.Duration.D()), Window: Duration(sk.Window.D()), Rate: sk.Rate, Thresholds: sk.Thresholds}
	default:
		return Plan{}, fmt.Errorf("plan: %q is not a long-run kind", kind)
	}
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	return p, nil
}
