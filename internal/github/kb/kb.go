// Package kb keeps perfgate's knowledge base of regressions in the store:
// it records a maintainer's finding (/perf rootcause, or the dashboard)
// and matches a new regression against the repository's findings. What a
// finding is and how two regressions compare is internal/analysis/kb's;
// this package reads and writes the store's root_causes.
package kb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/kb"
	"github.com/perfgate/perfgate/internal/store"
)

// Store is what the knowledge base needs of the database.
type Store interface {
	PutRootCause(ctx context.Context, r store.RootCause) (store.RootCause, error)
	ListRootCauses(ctx context.Context, repo string) ([]store.RootCause, error)
}

// KB records findings and matches regressions against them.
type KB struct {
	st Store
}

// New returns a knowledge base over st.
func New(st Store) *KB { return &KB{st: st} }

// Record stores a finding. A record needs its repository, its cause and
// who recorded it; its signature may be empty (a finding recorded before
// any measurement) but then it never matches.
func (k *KB) Record(ctx context.Context, r kb.Record) (kb.Record, error) {
	if strings.TrimSpace(r.Cause) == "" {
		return kb.Record{}, errors.New("record root cause: say what the cause was, e.g. `/perf rootcause scheduler priority change`")
	}
	sig, err := json.Marshal(r.Signature)
	if err != nil {
		return kb.Record{}, fmt.Errorf("record root cause: encode signature: %w", err)
	}
	if r.Summary == "" {
		r.Summary = r.Signature.Phenomenon()
	}
	out, err := k.st.PutRootCause(ctx, store.RootCause{ID: r.ID, Repo: r.Repo, Number: r.Number, URL: r.URL, Commit: r.Commit,
		CulpritPR: r.CulpritPR, Summary: r.Summary, Cause: r.Cause, FixURL: r.FixURL, Signature: sig, RecordedBy: r.By})
	if err != nil {
		return kb.Record{}, fmt.Errorf("record root cause: %w", err)
	}
	return FromStore(out)
}

// Match judges sig against the recorded findings of repo (see kb.Judge).
func (k *KB) Match(ctx context.Context, repo string, sig kb.Signature) (kb.Verdict, error) {
	rows, err := k.st.ListRootCauses(ctx, repo)
	if err != nil {
		return kb.Verdict{}, fmt.Errorf("match regression: %w", err)
	}
	records := make([]kb.Record, 0, len(rows))
	for _, row := range rows {
		r, err := FromStore(row)
		if err != nil {
			return kb.Verdict{}, fmt.Errorf("match regression: %w", err)
		}
		records = append(records, r)
	}
	return kb.Judge(records, sig), nil
}

// FromStore decodes a stored record.
func FromStore(r store.RootCause) (kb.Record, error) {
	out := kb.Record{ID: r.ID, Repo: r.Repo, Number: r.Number, URL: r.URL, Commit: r.Commit, CulpritPR: r.CulpritPR,
		Summary: r.Summary, Cause: r.Cause, FixURL: r.FixURL, By: r.RecordedBy, CreatedAt: r.CreatedAt}
	if len(r.Signature) > 0 {
		if err := json.Unmarshal(r.Signature, &out.Signature); err != nil {
			return kb.Record{}, fmt.Errorf("root cause %d: signature: %w", r.ID, err)
		}
	}
	return out, nil
}
