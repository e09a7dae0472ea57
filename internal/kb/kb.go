package kb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// DefaultThreshold is the largest distance that counts as a match: a mean
// cosine of 0.8 or more. A repeated regression (the same metrics moving the
// same way, the same profile shape) lands under 0.1; one with a different
// profile shape or different metrics above 0.4 (see the tests).
const DefaultThreshold = 0.2

// Record is one finding in the knowledge base.
type Record struct {
	ID        int64
	Repo      string
	Number    int    // the PR or issue where it was recorded: "#123"
	URL       string // a link to it
	Commit    string // the culprit commit
	CulpritPR int
	Summary   string // the phenomenon in words: "prefill interrupts decode"
	Cause     string // "scheduler priority change"
	FixURL    string
	Signature Signature
	By        string
	CreatedAt time.Time
}

// Store is what the knowledge base needs of the database.
type Store interface {
	PutRootCause(ctx context.Context, r store.RootCause) (store.RootCause, error)
	ListRootCauses(ctx context.Context, repo string) ([]store.RootCause, error)
}

// KB records findings and matches regressions against them.
type KB struct {
	st Store
	// Threshold is the largest distance Match accepts; DefaultThreshold
	// when 0.
	Threshold float64
}

// New returns a knowledge base over st.
func New(st Store) *KB { return &KB{st: st} }

// Record stores a finding. A record needs its repository, its cause and
// who recorded it; its signature may be empty (a finding recorded before
// any measurement) but then it never matches.
func (k *KB) Record(ctx context.Context, r Record) (Record, error) {
	if strings.TrimSpace(r.Cause) == "" {
		return Record{}, errors.New("record root cause: say what the cause was, e.g. `/perf rootcause scheduler priority change`")
	}
	sig, err := json.Marshal(r.Signature)
	if err != nil {
		return Record{}, fmt.Errorf("record root cause: encode signature: %w", err)
	}
	if r.Summary == "" {
		r.Summary = r.Signature.Phenomenon()
	}
	out, err := k.st.PutRootCause(ctx, store.RootCause{ID: r.ID, Repo: r.Repo, Number: r.Number, URL: r.URL, Commit: r.Commit,
		CulpritPR: r.CulpritPR, Summary: r.Summary, Cause: r.Cause, FixURL: r.FixURL, Signature: sig, RecordedBy: r.By})
	if err != nil {
		return Record{}, fmt.Errorf("record root cause: %w", err)
	}
	return FromStore(out)
}

// Match finds the recorded finding of repo nearest to sig: ok when its
// distance is within the threshold.
func (k *KB) Match(ctx context.Context, repo string, sig Signature) (Record, float64, bool, error) {
	rows, err := k.st.ListRootCauses(ctx, repo)
	if err != nil {
		return Record{}, 0, false, fmt.Errorf("match regression: %w", err)
	}
	records := make([]Record, 0, len(rows))
	for _, row := range rows {
		r, err := FromStore(row)
		if err != nil {
			return Record{}, 0, false, fmt.Errorf("match regression: %w", err)
		}
		records = append(records, r)
	}
	th := k.Threshold
	if th <= 0 {
		th = DefaultThreshold
	}
	r, d, ok := Nearest(records, sig, th)
	return r, d, ok, nil
}

// Nearest is the record nearest to sig (the newest on a tie) and its
// distance; ok when that is within threshold.
func Nearest(records []Record, sig Signature, threshold float64) (Record, float64, bool) {
	best, bestD := Record{}, math.Inf(1)
	for _, r := range records {
		if d := Distance(sig, r.Signature); d < bestD || (d == bestD && r.CreatedAt.After(best.CreatedAt)) {
			best, bestD = r, d
		}
	}
	return best, bestD, bestD <= threshold
}

// FromStore decodes a stored record.
func FromStore(r store.RootCause) (Record, error) {
	out := Record{ID: r.ID, Repo: r.Repo, Number: r.Number, URL: r.URL, Commit: r.Commit, CulpritPR: r.CulpritPR,
		Summary: r.Summary, Cause: r.Cause, FixURL: r.FixURL, By: r.RecordedBy, CreatedAt: r.CreatedAt}
	if len(r.Signature) > 0 {
		if err := json.Unmarshal(r.Signature, &out.Signature); err != nil {
			return Record{}, fmt.Errorf("root cause %d: signature: %w", r.ID, err)
		}
	}
	return out, nil
}

// MatchLine is the check run's sentence for a match, in markdown:
// "looks like [#123](…): prefill interrupts decode — scheduler priority
// change (distance 0.08)", with the fix when one was recorded.
func MatchLine(r Record, distance float64) string {
	ref := "a recorded regression"
	switch {
	case r.Number > 0 && r.URL != "":
		ref = fmt.Sprintf("[#%d](%s)", r.Number, r.URL)
	case r.Number > 0:
		ref = fmt.Sprintf("#%d", r.Number)
	case r.Commit != "":
		ref = "`" + shortSHA(r.Commit) + "`"
	}
	what := oneLine(r.Summary)
	if what == "" {
		what = r.Signature.Phenomenon()
	}
	line := fmt.Sprintf("looks like %s: %s — %s (distance %.2f)", ref, what, oneLine(r.Cause), distance)
	if r.FixURL != "" {
		line += "; fix: " + r.FixURL
	}
	return line
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}
