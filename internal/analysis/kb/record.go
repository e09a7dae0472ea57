package kb

import (
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/rev"
)

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

// MatchLine is the check run's sentence for a match, in markdown: "looks
// like [#123](…): prefill interrupts decode — scheduler priority change
// (strong (profile and metrics: …); agreeing: …)", with the fix when one
// was recorded. A metrics-only match says it is a hint.
func MatchLine(m Match) string {
	r := m.Record
	what := oneLine(r.Summary)
	if what == "" {
		what = r.Signature.Phenomenon()
	}
	verb := "looks like"
	if m.Strength == Weak {
		verb = "moved its metrics like"
	}
	line := fmt.Sprintf("%s %s: %s — %s (%s)", verb, ref(r), what, oneLine(r.Cause), m.Words())
	if m.Strength == Weak {
		line += "; no profile of the recorded cause to compare, so this is a hint, not a diagnosis"
	}
	if r.FixURL != "" {
		line += "; fix: " + r.FixURL
	}
	return line
}

// ref links a record: "[#123](…)", "#123", a commit, or words.
func ref(r Record) string {
	switch {
	case r.Number > 0 && r.URL != "":
		return fmt.Sprintf("[#%d](%s)", r.Number, r.URL)
	case r.Number > 0:
		return fmt.Sprintf("#%d", r.Number)
	case r.Commit != "":
		return "`" + rev.Short(r.Commit) + "`"
	}
	return "a recorded regression"
}

// PendingLine is the check run's sentence while a profile that decides a
// candidate match is still to come (queued) or was never taken.
func PendingLine(v Verdict, queued bool) string {
	if len(v.NeedsProfile) == 0 {
		return ""
	}
	m := v.NeedsProfile[0]
	if queued {
		return fmt.Sprintf("its metrics move like %s (%s, metric shape %.2f), which was recorded with a scheduler profile; the knowledge base compares the profiles when this one finishes — metrics alone cannot tell a scheduler change from a uniform slowdown",
			ref(m.Record), oneLine(m.Record.Cause), m.MetricSimilarity)
	}
	return fmt.Sprintf("its metrics move like %s (%s, metric shape %.2f), but that cause was recorded with a scheduler profile and this regression has none: `/perf profile` compares them — metrics alone cannot tell a scheduler change from a uniform slowdown",
		ref(m.Record), oneLine(m.Record.Cause), m.MetricSimilarity)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
