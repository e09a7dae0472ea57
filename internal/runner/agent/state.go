package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
)

// stateFile is the agent's identity in its state directory.
const stateFile = "agent.json"

// state is what the agent keeps between restarts: the token the server
// gave it at registration, so a restart reuses its identity (the same
// agent row) instead of registering anew.
type state struct {
	Server       string    `json:"server"`
	AgentID      int64     `json:"agent_id"`
	Name         string    `json:"name"`
	Token        string    `json:"token"`
	RegisteredAt time.Time `json:"registered_at"`
	// Labels and Cards are what the agent registered with: when they
	// change (a new driver, another card, new --labels) it registers again
	// so the server matches jobs to what the host now has.
	Labels []string     `json:"labels,omitempty"`
	Cards  []fleet.Card `json:"cards,omitempty"`
	// PendingToken is the token of a registration sent but not answered
	// (agentapi.RegisterRequest.Token): the server may hold it instead of
	// Token.
	PendingToken string `json:"pending_token,omitempty"`
}

// sameRegistration reports whether the saved registration still describes
// the agent.
func (st state) sameRegistration(labels []string, cards []fleet.Card) bool {
	return slices.Equal(st.Labels, labels) && slices.Equal(st.Cards, cards)
}

// loadState reads dir's state; ok is false when there is none yet.
func loadState(dir string) (st state, ok bool, err error) {
	p := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("read agent state: %w", err)
	}
	fi, err := os.Stat(p)
	if err == nil && fi.Mode().Perm()&0o077 != 0 {
		return state{}, false, fmt.Errorf("agent state %s is readable by others (mode %v): it holds the agent token; chmod 600 it", p, fi.Mode().Perm())
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, false, fmt.Errorf("agent state %s: %w (remove it to register again)", p, err)
	}
	if st.Token == "" && st.PendingToken == "" {
		return state{}, false, nil
	}
	return st, true, nil
}

// saveState writes the state atomically, readable by the agent's user only.
func saveState(dir string, st state) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent state dir: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode agent state: %w", err)
	}
	f, err := os.CreateTemp(dir, ".agent-*.json")
	if err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write agent state: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write agent state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write agent state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	return nil
}
