package agent_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/store"
)

// noCards is a host without GPUs (or without NVML).
type noCards struct{}

func (noCards) Open(string) (gpu.Device, error) { return nil, nil }
func (noCards) List() ([]gpu.Info, error)       { return nil, nil }
func (noCards) Close() error                    { return nil }

// TestTwoAgentsOneHostWithoutFlags: two agents started on one host with
// nothing but the server and the registration token (each with its own
// state directory, as two systemd units have) register as two runners,
// and each keeps its token while both poll: neither registers over the
// other. Before default names were unique per host both took the
// hostname, shared one row and took the token from each other.
func TestTwoAgentsOneHostWithoutFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		gpu   func() gpu.Provider
		names []string
	}{
		{"no GPU", func() gpu.Provider { return noCards{} }, []string{"gpu-box", "gpu-box-2"}},
		{"one card", func() gpu.Provider {
			return gpu.NewFakeProvider(gpu.NewFake("GPU-8f3a2c1e-0000-0000-0000-000000000000"))
		},
			[]string{"gpu-box-8f3a2c1e", "gpu-box-8f3a2c1e-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 10*time.Second)
			lockDir := t.TempDir()
			for i := range 2 {
				a, err := agent.New(agent.Config{Server: e.url(), RegistrationToken: regToken, Labels: []string{"gpu"},
					StateDir: filepath.Join(t.TempDir(), "state"), Host: "gpu-box", LockDir: lockDir, GPU: tt.gpu(),
					CacheDir: t.TempDir(), Docker: "no-docker-here", ClaimWait: 100 * time.Millisecond, Log: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- a.Run(ctx) }()
				t.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("agent %d: %v", i, err)
					}
				})
			}
			// seenSince waits until both rows called in after mark.
			var rows []store.Agent
			seenSince := func(what string, mark time.Time) {
				t.Helper()
				waitFor(t, what, 20*time.Second, func() bool {
					as, err := e.st.ListAgents(context.Background())
					if err != nil {
						return false
					}
					for _, a := range as {
						if a.LastSeenAt.Before(mark) {
							return false
						}
					}
					rows = as
					return len(as) >= 2
				})
			}
			seenSince("both agents to register", time.Time{})
			first := slices.Clone(rows)
			// Several claims each later, the same two rows with the same tokens.
			for range 3 {
				seenSince("both agents to claim again", time.Now())
			}
			var names []string
			for i, r := range rows {
				names = append(names, r.Name)
				if r.ID != first[i].ID || r.TokenHash != first[i].TokenHash {
					t.Errorf("runner %s: its token changed while both agents ran (id %d→%d)", r.Name, first[i].ID, r.ID)
				}
			}
			slices.Sort(names)
			if len(rows) != 2 || !slices.Equal(names, tt.names) {
				t.Errorf("runners %v, want %v", names, tt.names)
			}
		})
	}
}

// Two agents pointed at one state directory would share one token: the
// second refuses to start and says why.
func TestStateDirInUse(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	cfg := agent.Config{Server: "http://127.0.0.1:1", RegistrationToken: regToken, StateDir: dir, LockDir: t.TempDir(),
		GPU: noCards{}, CacheDir: t.TempDir(), Docker: "no-docker-here", Log: zerolog.Nop()}
	if _, err := agent.New(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.CacheDir = t.TempDir()
	_, err := agent.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "in use by another perfgate agent") {
		t.Errorf("second agent on one state directory: %v", err)
	}
}
