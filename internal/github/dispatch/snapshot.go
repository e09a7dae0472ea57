package dispatch

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// snapshot is a job's config snapshot: the agent's plan plus, under "gate",
// the tier's rules as the base branch's config had them at enqueue time.
// The agent ignores the extra key; the server judges the job by it, so a
// config change while a job runs cannot move that job's goalposts.
type snapshot struct {
	agentapi.Plan
	Gate *gateRules `json:"gate,omitempty"`
	// Cell labels the nightly matrix cell the plan measures ("c=16").
	Cell string `json:"cell,omitempty"`
	// Rules keep what queuing a profile on this job's regression needs
	// (findings.go).
	Rules *profileRules `json:"profile_rules,omitempty"`
	// Price is the repository's declared GPU price (cost.go); nil: none.
	Price *cost.Price `json:"price,omitempty"`
}

type gateRules struct {
	Tier          config.Tier   `json:"tier"`
	EscalateAfter time.Duration `json:"escalate_after"`
}

func newSnapshot(cfg *config.Config, plan agentapi.Plan) (snapshot, error) {
	t, err := cfg.Tier(plan.Tier)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{Plan: plan, Gate: &gateRules{Tier: t, EscalateAfter: cfg.EscalateAfter.D()}, Rules: rulesOf(cfg), Price: priceFrom(cfg)}, nil
}

func (s snapshot) encode() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode job snapshot: %w", err)
	}
	return b, nil
}

func snapshotOf(job store.Job) (snapshot, error) {
	var s snapshot
	if err := json.Unmarshal(job.Config, &s); err != nil {
		return snapshot{}, fmt.Errorf("decode snapshot of job %d: %w", job.ID, err)
	}
	if err := s.Plan.Validate(); err != nil {
		return snapshot{}, fmt.Errorf("snapshot of job %d: %w", job.ID, err)
	}
	return s, nil
}

// tierOf is the tier's rules a job is judged by: those it was queued with,
// or the defaults for a job queued by hand without them.
func tierOf(job store.Job) (config.Tier, error) {
	if s, err := snapshotOf(job); err == nil && s.Gate != nil {
		return s.Gate.Tier, nil
	}
	return config.Default().Tier(job.Tier)
}

func escalateAfter(job store.Job) time.Duration {
	if s, err := snapshotOf(job); err == nil && s.Gate != nil && s.Gate.EscalateAfter > 0 {
		return s.Gate.EscalateAfter
	}
	return config.Default().EscalateAfter.D()
}
