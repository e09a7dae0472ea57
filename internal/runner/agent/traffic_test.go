package agent

import (
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// The plan's traffic shape is what the runner's bench client plays.
func TestBenchOptionsCarryTheTrafficShape(t *testing.T) {
	t.Parallel()
	shape := &result.Traffic{Sessions: &result.Sessions{Turns: 3, UserLen: 16}, Models: []result.ModelShare{{Name: "m", Weight: 1}}}
	plan := agentapi.Plan{Workload: agentapi.Workload{NumPrompts: 30, Traffic: shape}}
	if got := (&Agent{}).benchOptions(plan, "http://x", &agentapi.ClaimResponse{JobID: 1}, &side{}).Traffic; got != shape {
		t.Errorf("bench options traffic %+v, want the plan's %+v", got, shape)
	}
}
