package agentserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// A registration's cards are kept and label the runner; cards that are
// not the agent's GPUs are refused with the reason.
func TestRegisterCards(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{})
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
		{"a card of 2^62 MiB", agentapi.RegisterRequest{Name: "x", GPUUUIDs: []string{"GPU-1"}, Cards: []fleet.Card{{UUID: "GPU-1", MemoryMiB: 1 << 62}}}, "out of range"},
	} {
		var eb agentapi.ErrorBody
		if code := call(t, ts, regToken, "/api/v1/agents/register", tc.req, &eb); code != 400 || !strings.Contains(eb.Error, tc.want) {
			t.Errorf("%s: %d %q, want 400 saying %q", tc.name, code, eb.Error, tc.want)
		}
	}
}

// Over the API: a drained runner's claims come back empty while another
// runner takes the work, and a job pinned to a card goes only to the
// agent that reported that card.
func TestDrainedAndPinnedOverTheAPI(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{})
	ctx := context.Background()
	reg := func(name, gpu string) agentapi.RegisterResponse {
		var r agentapi.RegisterResponse
		if code := call(t, ts, regToken, "/api/v1/agents/register", agentapi.RegisterRequest{Name: name, Labels: []string{"gpu"},
			GPUUUIDs: []string{gpu}, Cards: []fleet.Card{{UUID: gpu, Model: "NVIDIA H100 80GB HBM3"}}}, &r); code != 200 {
			t.Fatalf("register %s: %d", name, code)
		}
		return r
	}
	a, b := reg("a", "GPU-a"), reg("b", "GPU-b")
	pinned, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "merge", Labels: []string{"gpu", "h100"}, GPUUUID: "GPU-b"})
	if err != nil {
		t.Fatal(err)
	}
	free, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "quick", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetAgentDrained(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	var got agentapi.ClaimResponse
	if code := call(t, ts, b.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, &got); code != 204 {
		t.Fatalf("drained runner's claim: %d (job %d), want 204", code, got.JobID)
	}
	// a may take the free job, never the pinned one, though it comes first.
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, &got); code != 200 || got.JobID != free.ID {
		t.Fatalf("a claimed %d (%d), want the unpinned job %d", got.JobID, code, free.ID)
	}
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, nil); code != 204 {
		t.Fatalf("a's second claim: %d, want 204: the pinned job waits for its card", code)
	}
	if _, err := st.SetAgentDrained(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	got = agentapi.ClaimResponse{}
	if code := call(t, ts, b.Token, "/api/v1/jobs/claim?wait=100ms", struct{}{}, &got); code != 200 || got.JobID != pinned.ID || got.GPUUUID != "GPU-b" {
		t.Fatalf("b claimed %d on %q (%d), want the pinned job %d on GPU-b", got.JobID, got.GPUUUID, code, pinned.ID)
	}
}

// A runner proposes its token: the server keeps a well-formed one, takes
// the same registration again (its answer was lost) without the previous
// token, still refuses a different one without it, and refuses a
// malformed proposal.
func TestRegisterProposedToken(t *testing.T) {
	_, ts := newServer(t, agentserver.Options{})
	first, err := agentapi.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	other, err := agentapi.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  agentapi.RegisterRequest
		code int
		want string // the token answered, or a word of the error
	}{
		{"proposed", agentapi.RegisterRequest{Name: "box", Token: first}, 200, first},
		{"the same again, its answer lost", agentapi.RegisterRequest{Name: "box", Token: first}, 200, first},
		{"another without the name's token", agentapi.RegisterRequest{Name: "box", Token: other}, 409, "in use"},
		{"another presenting the name's token", agentapi.RegisterRequest{Name: "box", Token: other, PreviousToken: first}, 200, other},
		{"malformed", agentapi.RegisterRequest{Name: "new", Token: "pga_1234"}, 400, "64 lower-case hex digits"},
		{"upper-case hex", agentapi.RegisterRequest{Name: "new", Token: agentapi.AgentTokenPrefix + strings.ToUpper(strings.TrimPrefix(other, agentapi.AgentTokenPrefix))}, 400, "proposed token"},
	} {
		var out struct {
			agentapi.RegisterResponse
			agentapi.ErrorBody
		}
		code := call(t, ts, regToken, "/api/v1/agents/register", tc.req, &out)
		if code != tc.code || (code == 200 && out.Token != tc.want) || (code != 200 && !strings.Contains(out.Error, tc.want)) {
			t.Errorf("%s: %d %q %q, want %d %q", tc.name, code, out.Token, out.Error, tc.code, tc.want)
		}
	}
}
