package agent_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
)

// TestCardsAtRegistration: the agent reports its cards (model, memory,
// driver) when it registers, the server labels it with them, and a
// restart whose cards changed (a driver upgrade) registers again under the
// same row, while an unchanged restart reuses its identity.
func TestCardsAtRegistration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 10*time.Second)
	stateDir := filepath.Join(t.TempDir(), "state")
	card := gpu.NewFake("GPU-c1")
	// runAgent runs the agent until the server's row shows it called in
	// and satisfies want: a claim the previous run left in flight on the
	// server may still mark the row seen after that run stopped.
	runAgent := func(regToken string, want func(store.Agent) bool) store.Agent {
		t.Helper()
		a, err := agent.New(agent.Config{Server: e.url(), RegistrationToken: regToken, Name: "box", Labels: []string{"gpu", "lab"}, StateDir: stateDir,
			GPU: gpu.NewFakeProvider(card), CacheDir: t.TempDir(), Docker: "no-docker-here", ClaimWait: 100 * time.Millisecond, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().Add(-time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		// Registering and claiming both mark the row seen.
		var row store.Agent
		waitFor(t, "the agent to call in", 20*time.Second, func() bool {
			agents, err := e.st.ListAgents(context.Background())
			if err != nil || len(agents) != 1 || agents[0].LastSeenAt.Before(before) || !want(agents[0]) {
				return false
			}
			row = agents[0]
			return true
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return row
	}
	anyRow := func(store.Agent) bool { return true }
	first := runAgent(regToken, anyRow)
	if len(first.Cards) != 1 || first.Cards[0].Model != "NVIDIA H100 80GB HBM3 (fake)" || first.Cards[0].MemoryMiB != 81559 || first.Cards[0].Driver != "550.54.15" {
		t.Errorf("cards = %+v", first.Cards)
	}
	for _, l := range []string{"gpu", "lab", "h100", "mem-80gb", "driver-550", "driver-550.54.15"} {
		if !slices.Contains(first.Labels, l) {
			t.Errorf("labels %v lack %q", first.Labels, l)
		}
	}
	// The same host restarted: no new registration, the same token.
	again := runAgent(regToken, anyRow)
	if again.TokenHash != first.TokenHash {
		t.Error("an unchanged restart registered again")
	}
	// A driver upgrade: it registers again, same row, new labels.
	card.SetInfo(func(i *gpu.Info) { i.Driver = "555.42.02" })
	upgraded := runAgent(regToken, func(a store.Agent) bool { return a.TokenHash != first.TokenHash })
	if upgraded.ID != first.ID || upgraded.TokenHash == first.TokenHash || !slices.Contains(upgraded.Labels, "driver-555") || slices.Contains(upgraded.Labels, "driver-550") {
		t.Errorf("after the upgrade: id %d (was %d), labels %v", upgraded.ID, first.ID, upgraded.Labels)
	}
	// Without a registration token it keeps the saved identity and says so.
	card.SetInfo(func(i *gpu.Info) { i.Driver = "560.1" })
	if kept := runAgent("", anyRow); kept.TokenHash != upgraded.TokenHash {
		t.Error("without a registration token the agent lost its identity")
	}
}
