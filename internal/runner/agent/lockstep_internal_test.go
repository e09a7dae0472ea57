package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// lockstep alternates which side measures first, step by step, and runs
// each sweep to its end even when the other finishes first.
func TestLockstep(t *testing.T) {
	t.Parallel()
	knee := map[string]float64{agentapi.SideBase: 20, agentapi.SideHead: 5}
	sweeps := map[string]*capacity.Sweep{}
	for name := range knee {
		sw, err := capacity.NewSweep(capacity.Plan{}, capacity.SLO{TTFTms: 500})
		if err != nil {
			t.Fatal(err)
		}
		sweeps[name] = sw
	}
	var seq []string
	err := lockstep(context.Background(), sweeps, func(name string, rate float64) (capacity.Step, error) {
		seq = append(seq, name[:1])
		st := capacity.Step{Rate: rate, Sent: 100, Good: 100, Throughput: rate}
		if rate > knee[name] {
			st.Good = 10
		}
		return st, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(seq, "")
	if !strings.HasPrefix(got, "bhhbbh") {
		t.Errorf("order %s: want B H | H B | B H … while both sweep", got)
	}
	for name, sw := range sweeps {
		if k := sw.Knee(); k.Rate > knee[name] || k.Below <= knee[name] && k.Below != 0 {
			t.Errorf("%s: knee %+v, want the bracket around %g", name, k, knee[name])
		}
	}
}
