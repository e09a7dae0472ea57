package agentapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// A repository's traffic shape reaches the runner in the plan, through
// its JSON, and a plan with a broken shape is refused.
func TestPlanCarriesTheTrafficShape(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse(config.DefaultPath, []byte("workload:\n  sessions: {turns: 4, user_len: 32}\n  models:\n    - {name: base, weight: 1}\n    - {name: lora, weight: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := agentapi.PlanAt(cfg, "quick", agentapi.Commits{Repo: "o/r", Head: "aaaa1111"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := agentapi.ParsePlan(raw)
	if err != nil {
		t.Fatal(err)
	}
	tr := back.Workload.Traffic
	if tr == nil || tr.Sessions == nil || tr.Sessions.Turns != 4 || tr.Sessions.UserLen != 32 || len(tr.Models) != 2 || tr.Models[1].Name != "lora" {
		t.Errorf("plan traffic %+v", tr)
	}
	if plain, _ := agentapi.PlanAt(config.Default(), "quick", agentapi.Commits{Repo: "o/r", Head: "aaaa1111"}); plain.Workload.Traffic != nil {
		t.Errorf("the default plan has a traffic shape: %+v", plain.Workload.Traffic)
	}
	bad := strings.Replace(string(raw), `"turns":4`, `"turns":0`, 1)
	if _, err := agentapi.ParsePlan([]byte(bad)); err == nil || !strings.Contains(err.Error(), "sessions.turns") {
		t.Errorf("a plan with 0 turns: %v", err)
	}
}
