package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxNameIndex bounds the search for a free default name on one host.
const maxNameIndex = 64

// identity is what keeps two agents on one host apart: the state
// directory's lock (two agents sharing it would share one token) and the
// lock on the name this agent registers under.
type identity struct {
	locks []*os.File
}

// release lets another agent on this host take the name and state directory.
func (id *identity) release() {
	for _, f := range id.locks {
		_ = unlockFile(f) // best effort: closing releases it too, once no fork shares it
		f.Close()
	}
	id.locks = nil
}

// lockStateDir takes the state directory for this agent alone.
func (id *identity) lockStateDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent state dir: %w", err)
	}
	f, ok, err := tryLock(filepath.Join(dir, "agent.lock"))
	if err != nil {
		return fmt.Errorf("lock the state directory: %w", err)
	}
	if !ok {
		return fmt.Errorf("state directory %s is in use by another perfgate agent on this host: give each agent its own --state-dir (one agent per card: --gpu UUID)", dir)
	}
	id.locks = append(id.locks, f)
	return nil
}

// defaultName is the name an agent registers under when it was given none
// and has none saved: unique per card, so that agents started on one host
// without flags are distinct runners instead of one runner whose token
// each takes from the other. An agent on one card is host-<card> (the
// card's UUID, shortened); one on none or several cards is host. When
// another agent on this host holds that name, the next free of base-2,
// base-3, … is taken.
func (id *identity) defaultName(lockDir, host string, cards []string) (string, error) {
	base := host
	if len(cards) == 1 {
		base = host + "-" + shortGPU(cards[0])
	}
	for i := 1; i <= maxNameIndex; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		f, ok, err := tryLock(nameLockPath(lockDir, name))
		if err != nil {
			return "", fmt.Errorf("lock the agent name: %w", err)
		}
		if ok {
			id.locks = append(id.locks, f)
			return name, nil
		}
	}
	return "", fmt.Errorf("%d agents named %s already run on this host: name this one with --name", maxNameIndex, base)
}

// holdName takes the lock on a name given with --name or saved in the
// state directory, so that an unnamed agent started later does not pick
// it. It only reports whether another agent here already holds it: names
// are the operator's to give, and the server arbitrates them.
func (id *identity) holdName(lockDir, name string) (free bool, err error) {
	f, ok, err := tryLock(nameLockPath(lockDir, name))
	if err != nil || !ok {
		return false, err
	}
	id.locks = append(id.locks, f)
	return true, nil
}

func nameLockPath(dir, name string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name)
	return filepath.Join(dir, "perfgate-agent-"+safe+".lock")
}

// errLocked is what lockFile returns when another open file holds the lock.
var errLocked = errors.New("locked")

// tryLock opens path (creating it) and takes an exclusive lock on it
// without waiting; ok is false when another agent holds it. The lock lasts
// until the file is closed or the process exits, so a killed agent frees
// its name at once.
func tryLock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	switch err := lockFile(f); {
	case err == nil:
		return f, true, nil
	case errors.Is(err, errLocked):
		f.Close()
		return nil, false, nil
	default:
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
}
