package agentapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/fleet"
)

// A registration's cards are kept and label the runner; cards that are
// not the agent's GPUs are refused with the reason.
func TestRegisterCards(t *testing.T) {
	st, ts := newServer(t, agentapi.Options{})
	h100 := fleet.Card{UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "550.54.15"}
	var reg agentapi.RegisterResponse
	if code := call(t, ts, regToken, "/api/v1/agents/register", agentapi.RegisterRequest{Name: "box", Labels: []string{"gpu", "lab"},
		GPUUUIDs: []string{"GPU-1"}, Cards: []fleet.Card{h100}}, &reg); code != 200 {
		t.Fatalf("register: %d", code)
	}
	agents, err := st.ListAgents(context.Background())
	if err != nil || len(agents) != 1 || !slices.Equal(agents[0].Cards, []fleet.Card{h100}) {
		t.Fatalf("agents = %+v, %v", agents, err)
	}
	want := []string{"gpu", "lab", "driver-550", "driver-550.54.15", "h100", "mem-80gb", "nvidia-h100-80gb-hbm3"}
	if !slices.Equal(agents[0].Labels, want) {
		t.Errorf("labels = %v, want %v", agents[0].Labels, want)
	}
	many := make([]fleet.Card, agentapi.MaxCards+1)
	var uuids []string
	for i := range many {
		many[i].UUID = fmt.Sprintf("GPU-%d", i)
		uuids = append(uuids, many[i].UUID)
	}
	for _, tc := range []struct {
		name string
		req  agentapi.RegisterRequest
		want string
	}{
		{"a card it does not use", agentapi.RegisterRequest{Name: "x", GPUUUIDs: []string{"GPU-1"}, Cards: []fleet.Card{{UUID: "GPU-2"}}}, "not among gpu_uuids"},
		{"a card twice", agentapi.RegisterRequest{Name: "x", GPUUUIDs: []string{"GPU-1"}, Cards: []fleet.Card{h100, h100}}, "reported twice"},
		{"a card without a uuid", agentapi.RegisterRequest{Name: "x", Cards: []fleet.Card{{Model: "m"}}}, "no uuid"},
		{"too many cards", agentapi.RegisterRequest{Name: "x", GPUUUIDs: uuids, Cards: many}, "at most 64"},
	} {
		var eb agentapi.ErrorBody
		if code := call(t, ts, regToken, "/api/v1/agents/register", tc.req, &eb); code != 400 || !strings.Contains(eb.Error, tc.want) {
			t.Errorf("%s: %d %q, want 400 saying %q", tc.name, code, eb.Error, tc.want)
		}
	}
}
