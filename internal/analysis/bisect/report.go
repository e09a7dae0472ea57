package bisect

import (
	"fmt"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Markdown renders the bisect for a check run or a comment: the result, the
// notes, and every decision with the runs behind it.
func (s *State) Markdown() string {
	var b strings.Builder
	cfg := s.Config
	last := len(s.Commits) - 1
	where := ""
	if cfg.Repo != "" {
		where = " in " + cfg.Repo
	}
	fmt.Fprintf(&b, "### perfgate bisect: %s%s, %s..%s\n\n", cfg.Metric, where, rev.Short(s.Commits[0].SHA), rev.Short(s.Commits[last].SHA))
	r := s.Result
	switch {
	case r == nil:
		fmt.Fprintf(&b, "In progress: %d of at most %d GPU jobs so far; the change is after %s and at or before %s.\n\n",
			s.Jobs, cfg.MaxJobs, rev.Short(s.Commits[s.Lo].SHA), rev.Short(s.Commits[s.Hi].SHA))
	case r.Status == Found:
		fmt.Fprintf(&b, "**Culprit: %s** — %s %s against its parent `%s`, measured side by side.\n\n",
			commitCell(*r.Culprit), cfg.Metric, pct(r.CulpritChange), rev.Short(r.Parent.SHA))
	default:
		fmt.Fprintf(&b, "**%s.** %s\n\n", statusText(r.Status), r.Message)
	}
	if r != nil {
		fmt.Fprintf(&b, "%d commits after the good one (the ends differ by %s); %d measured between the ends; %d GPU jobs, %d runs, every commit interleaved with its reference on one card.\n\n",
			r.Commits, pct(r.Change), r.Steps, r.Jobs, r.Runs)
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "> %s\n", n)
		}
		if len(r.Notes) > 0 {
			b.WriteString("\n")
		}
		if len(r.Candidates) > 0 {
			b.WriteString("Candidates:\n\n")
			for _, c := range r.Candidates {
				skip := ""
				if c.Skip != "" {
					skip = " — not measured: " + escape(c.Skip)
				}
				fmt.Fprintf(&b, "- %s%s\n", commitCell(c), skip)
			}
			b.WriteString("\n")
		}
	}
	if len(s.Steps) == 0 {
		return b.String()
	}
	unit := ""
	if cfg.Unit != "" {
		unit = " (" + cfg.Unit + ")"
	}
	fmt.Fprintf(&b, "| after job | commit | position | pairs | %s median%s | vs good | vs bad | decision |\n", cfg.Metric, unit)
	b.WriteString("|---:|---|---:|---:|---:|---|---|---|\n")
	for _, st := range s.Steps {
		c := s.Commits[st.Index]
		pos := fmt.Sprintf("%d/%d", st.Index, last)
		switch st.Index {
		case 0:
			pos = "good"
		case last:
			pos = "bad"
		}
		med := "—"
		if st.Median > 0 {
			med = fmt.Sprintf("%.4g", st.Median)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %s | %s | %s | %s |\n", st.Seq, commitCell(c), pos, st.Pairs, med,
			comparisonCell(st.VsGood), comparisonCell(st.VsBad), escape(st.Decision))
	}
	// Every run's value, commit by commit in history order.
	fmt.Fprintf(&b, "\n<details><summary>Every run's %s%s</summary>\n\n", cfg.Metric, unit)
	for i, c := range s.Commits {
		if len(c.Values) == 0 {
			continue
		}
		vals := make([]string, len(c.Values))
		for k, v := range c.Values {
			vals[k] = fmt.Sprintf("%.4g", v)
		}
		fmt.Fprintf(&b, "- `%s` (%d/%d): %s\n", rev.Short(c.SHA), i, last, strings.Join(vals, ", "))
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

func statusText(s Status) string {
	switch s {
	case Range:
		return "Narrowed to a range"
	case OutOfBudget:
		return "Out of budget"
	case NoDifference:
		return "No difference between the ends"
	case Unclear:
		return "No clear difference between the ends"
	case EndFailed:
		return "An end could not be measured"
	}
	return string(s)
}

func commitCell(c Commit) string {
	sha := "`" + rev.Short(c.SHA) + "`"
	if c.URL != "" {
		sha = "[" + sha + "](" + c.URL + ")"
	}
	d := describe(Commit{SHA: "", Title: c.Title, PR: c.PR})
	return strings.TrimSpace(sha + " " + escape(strings.TrimSpace(d)))
}

func comparisonCell(c Comparison) string {
	if c.Outcome == "" {
		return ""
	}
	return fmt.Sprintf("%s (%s)", c.Outcome, pct(c.Change()))
}

// escape keeps a table cell one cell.
func escape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", "").Replace(s)
}
