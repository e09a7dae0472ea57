package promotion

import (
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// HistorySessions caps the baselines fed to the gate as its noise history:
// each is one session of unchanged code.
const HistorySessions = 8

// Row is a stored baseline as the history rule reads it: the columns it
// filters by, and its documents, decoded only when the columns match (the
// runs are the expensive part).
type Row struct {
	Version int
	GPU     string
	Decode  func() (Stored, error)
}

// Stored is a stored baseline's documents.
type Stored struct {
	Label string // how a report names the session
	Load  result.Load
	Runs  []*result.Result
}

// Sessions is the noise history among stored baselines (newest first): those
// measured on the same card model under the same load, newest first, at
// most HistorySessions, leaving out version except (0: none). A baseline
// that no longer decodes is skipped: the history is a prior, not evidence.
func Sessions(rows []Row, gpu string, load result.Load, except int) []gate.Session {
	var out []gate.Session
	for _, r := range rows {
		if len(out) == HistorySessions {
			break
		}
		if r.Version == except || r.GPU != gpu {
			continue
		}
		s, err := r.Decode()
		if err != nil || s.Load != load {
			continue
		}
		out = append(out, gate.Session{Label: s.Label, Runs: s.Runs})
	}
	return out
}

// SessionLabel names a stored baseline in a report: by its release label
// when it has one, else by its commit.
func SessionLabel(version int, commit, label string) string {
	if label != "" {
		return fmt.Sprintf("baseline #%d (%s)", version, label)
	}
	return fmt.Sprintf("baseline #%d (commit %s)", version, rev.Log(commit))
}
