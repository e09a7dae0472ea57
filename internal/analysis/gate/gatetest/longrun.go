package gatetest

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/longrun"
	"github.com/perfgate/perfgate/internal/analysis/soak"
)

// The long runs' recorded measurements: two sweeps against the sim with
// 64 and 9 KV-cache blocks (copies of internal/analysis/capacity's
// testdata) and a leaking and a clean soak (of internal/analysis/soak's).
//
//go:embed testdata/*.json
var recorded embed.FS

// longRunCases are the capacity and soak verdict documents the real
// judges make of the recorded runs: a capacity regression, a capacity
// comparison the host distorted (cannot tell), the nightly's sweep of the
// head alone (recorded), a soak that leaks and one that does not.
func longRunCases() ([]spec, error) {
	base, err := sweepOf("capacity_base.json")
	if err != nil {
		return nil, err
	}
	head, err := sweepOf("capacity_head.json")
	if err != nil {
		return nil, err
	}
	soakOf := func(name string) func() (*gate.Report, error) {
		return func() (*gate.Report, error) {
			var samples []soak.Sample
			if err := read(name, &samples); err != nil {
				return nil, err
			}
			return longrun.Soak(soak.Judge(samples, soak.DefaultThresholds()))
		}
	}
	return []spec{
		{"capacity", gate.RuleCapacity, func() (*gate.Report, error) {
			return longrun.Capacity(capacity.Compare([]capacity.Knee{base.Knee()}, []capacity.Knee{head.Knee()}, capacity.DefaultThreshold))
		}},
		{"capacity_cannot_tell", gate.RuleCannotTell, func() (*gate.Report, error) {
			starved, err := replay(head, 16, "client-bound: its CPU was starved (schedule lag 180 ms)")
			if err != nil {
				return nil, err
			}
			return longrun.Capacity(capacity.Compare([]capacity.Knee{base.Knee()}, []capacity.Knee{starved.Knee()}, capacity.DefaultThreshold))
		}},
		{"capacity_recorded", gate.RuleRecorded, func() (*gate.Report, error) {
			return longrun.Capacity(capacity.Record([]capacity.Knee{head.Knee()}, capacity.DefaultThreshold))
		}},
		{"soak_leak", gate.RuleSoak, soakOf("soak_leak.json")},
		{"soak_clean", gate.RuleSoak, soakOf("soak_clean.json")},
	}, nil
}

// replay sweeps again through the recorded steps of s, with the host
// distorting every try at rate (the client ran late and sent short of it),
// as a CPU hog beside the runner does.
func replay(s *capacity.Sweep, rate float64, why string) (*capacity.Sweep, error) {
	out, err := capacity.NewSweep(s.Plan, s.SLO)
	if err != nil {
		return nil, err
	}
	for {
		r, ok := out.Next()
		if !ok {
			return out, nil
		}
		st, found := stepAt(s, r)
		if !found {
			return nil, fmt.Errorf("replay: the recorded sweep has no step at %g requests/s", r)
		}
		if r == rate {
			st.Distorted, st.Achieved = why, 0.6*r
		}
		if err := out.Observe(st); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
}

func stepAt(s *capacity.Sweep, r float64) (capacity.Step, bool) {
	for _, j := range s.Steps {
		if j.Rate == r {
			return j.Step, true
		}
	}
	return capacity.Step{}, false
}

func sweepOf(name string) (*capacity.Sweep, error) {
	var s capacity.Sweep
	if err := read(name, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func read(name string, v any) error {
	b, err := recorded.ReadFile("testdata/" + name)
	if err != nil {
		return fmt.Errorf("recorded %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("recorded %s: %w", name, err)
	}
	return nil
}
