package drift

import (
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/figure"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Links makes dashboard links (web.Handler has them).
type Links interface {
	SeriesURL(repo, key, metric string) string
}

// Marker identifies a record's issue: the pass writes one per member in
// the issue's body, and finds the issue by it after a crash between
// opening the issue and storing its number.
func Marker(id int64) string { return fmt.Sprintf("<!-- perfgate:change-point id=%d -->", id) }

// IssueText is the event's issue: the leader in the title, a digest (how
// many change points, metrics and cells), the cost when priced, the table
// of members with which lead and which ride along, and the markers. links
// may be nil (no dashboard column links).
func IssueText(e *Event, links Links) (title, body string) {
	first := e.Leader()
	metrics, cells := map[string]bool{}, map[string]bool{}
	for _, c := range e.Members {
		metrics[c.Metric], cells[c.Key] = true, true
	}
	title = fmt.Sprintf("perfgate: %s %s on %s since %s (%s..%s)", first.Metric, pct(first.Change), first.Key,
		first.Day.Format("2006-01-02"), rev.Short(first.GoodSHA), rev.Short(first.BadSHA))
	if len(e.Members) > 1 {
		title += fmt.Sprintf(", and %d more", len(e.Members)-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "perfgate's nightly change-point analysis found a **regression** on the default branch, starting at `%s` (%s); the last good commit is `%s` (%s).\n\n",
		first.BadSHA, first.Day.Format("2006-01-02"), first.GoodSHA, first.GoodDay.Format("2006-01-02"))
	fmt.Fprintf(&b, "**Digest:** one step, %d change point%s across %d metric%s and %d matrix cell%s; led by `%s` on `%s` (%s, %.0f× its night-to-night noise).\n\n",
		len(e.Members), figure.Plural(len(e.Members), "", "s"), len(metrics), figure.Plural(len(metrics), "", "s"), len(cells), figure.Plural(len(cells), "", "s"),
		first.Metric, first.Key, pct(first.Change), Effect(first))
	if line := costLine(e); line != "" {
		b.WriteString(line + "\n\n")
	}
	fmt.Fprintf(&b, "Commit range: https://github.com/%s/compare/%s...%s\n\n", first.Repo, first.GoodSHA, first.BadSHA)
	fmt.Fprintf(&b, "| benchmark | metric | since | before (σ) | after (σ) | change | noise | dashboard |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range e.Members {
		link := ""
		if links != nil {
			link = "[series](" + links.SeriesURL(c.Repo, c.Key, c.Metric) + ")"
		}
		role := fmt.Sprintf("%.1f%% (leads)", 100*Noise(c))
		if !Leads(c) {
			role = fmt.Sprintf("%.1f%% (noisy: rides along)", 100*Noise(c))
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %.4g (%.2g) | %.4g (%.2g) | **%s** | %s | %s |\n", c.Key, c.Metric, c.Day.Format("01-02"),
			c.MeanBefore, c.StdBefore, c.MeanAfter, c.StdAfter, pct(c.Change), role, link)
	}
	fmt.Fprintf(&b, "\nMagnitudes are the change of the mean between the segments either side of the change point (E-divisive means, as Apache Otava), confirmed by at least %d nights on each side. ", ConfirmNights)
	fmt.Fprintf(&b, "A metric whose change is under %d× its own night-to-night noise does not open an issue on its own; it is listed here when it moved with this step.\n", LeadEffect)
	fmt.Fprintf(&b, "To find the commit, bisect between `%s` (good) and `%s` (bad).\n", rev.Short(first.GoodSHA), rev.Short(first.BadSHA))
	fmt.Fprintf(&b, "perfgate edits this issue only when a steady metric's change point joins, leaves or moves by %.1f points or more (noisy ones are written in then; the dashboard shows them live), and closes it as retracted if the step disappears.\n\n", 100*MaterialChange)
	for _, c := range e.Members {
		b.WriteString(Marker(c.ID) + "\n")
	}
	return title, b.String()
}

// SlackText is an event's one message: the leader, how many change points
// moved with it, the commits, what it costs, what the repository's open
// regressions cost together (total, OpenTotal's words), the issue and the
// dashboard. links may be nil.
func SlackText(e *Event, total string, links Links) string {
	rec := e.Leader()
	text := fmt.Sprintf(":warning: perfgate: *%s* %s on `%s` of %s since %s (commits %s..%s)",
		rec.Metric, pct(rec.Change), rec.Key, rec.Repo, rec.Day.Format("2006-01-02"), rev.Short(rec.GoodSHA), rev.Short(rec.BadSHA))
	if n := len(e.Members) - 1; n > 0 {
		text += fmt.Sprintf(", with %d more change point%s of the same step", n, figure.Plural(n, "", "s"))
	}
	if e.Cost != nil && e.Cost.Unpriced == "" {
		text += "\nCost if it stays: " + e.Cost.Plain()
	}
	if total != "" {
		text += "\n" + total
	}
	if e.URL != "" {
		text += "\nIssue (updated there, not here): " + e.URL
	}
	if links != nil {
		text += "\nDashboard: " + links.SeriesURL(rec.Repo, rec.Key, rec.Metric)
	}
	return text
}

// RetractComment is the comment that closes a retracted issue, written on
// the day now.
func RetractComment(r Retraction, now time.Time) string {
	return fmt.Sprintf("**Retracted.** perfgate's nightly analysis of %s no longer finds the change point%s this issue reported (%s): "+
		"the series is back at its earlier level — a slow night, or nights re-measured — so there is no regression to find. Closing; "+
		"a step that comes back opens a new issue.", now.UTC().Format("2006-01-02"), figure.Plural(len(r.Members), "", "s"), memberList(r.Members, 4))
}

// RetractSlack tells Slack an alert it heard is withdrawn.
func RetractSlack(r Retraction) string {
	first := r.Members[0]
	text := fmt.Sprintf(":white_check_mark: perfgate: retracted — the regression of %s reported since %s is no longer found (the series came back)",
		first.Repo, first.Day.Format("2006-01-02"))
	if first.IssueURL != "" {
		text += "; issue closed: " + first.IssueURL
	} else {
		text += fmt.Sprintf("; issue #%d closed", r.Issue)
	}
	return text
}

// memberList words up to n change points: "`tpot_median` on `nightly/c=1`
// +8%, … and 3 more".
func memberList(recs []ChangePoint, n int) string {
	var parts []string
	for i, c := range recs {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(recs)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("`%s` on `%s` %s", c.Metric, c.Key, pct(c.Change)))
	}
	return strings.Join(parts, ", ")
}

// pct is a change point's change as the dashboard prints the same record
// (figure.Change: "−10.0%"), so the digest and the pages read one way.
func pct(f float64) string { return figure.Change(f) }
