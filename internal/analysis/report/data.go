package report

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// summaryData is what check_summary.md.tmpl sees.
type summaryData struct {
	View
	Icon, Title, Lead, Escalation, SecondaryNote string
	TableRows, DetailRows, SecondaryRows         []tableRow
	NextSteps                                    []string
	costLines
}

// costLines are a regression's price and the assumption behind it; a
// regression the price cannot reach (a latency, errors) says why in the
// details, not on the author's first screen.
type costLines struct {
	CostLine, CostAssumption, CostDetail string
}

func costLinesOf(v View) costLines {
	switch v.Verdict {
	case Warning, Escalated, Accepted:
		if v.Cost == nil {
			return costLines{}
		}
		if v.Cost.Unpriced != "" {
			return costLines{CostDetail: v.Cost.Line()}
		}
		return costLines{CostLine: v.Cost.Line(), CostAssumption: cost.Assumption}
	}
	return costLines{}
}

type tableRow struct{ Cells []string }

// commentData is what comment.md.tmpl sees.
type commentData struct {
	View
	Icon, ShortSHA, Deadline, EscalateAfterText string
	Escalated                                   bool
	// Actions is what the author can do, in one line.
	Actions               string
	TableRows, DetailRows []tableRow
	costLines
}

func summaryDataOf(v View) summaryData {
	d := summaryData{View: v, SecondaryNote: "shown, never blocking on their own", costLines: costLinesOf(v)}
	d.TableRows = table(firstScreen(v.Rows))
	d.DetailRows = detailTable(v.Rows)
	d.SecondaryRows = table(v.Secondary)
	short := shortSHA(v.SHA)
	switch v.Verdict {
	case Pass:
		d.Icon, d.Title = "✅", fmt.Sprintf("perfgate / %s: no performance regression", v.Tier)
		d.Lead = fmt.Sprintf("Every gated metric of %s is within its threshold of the baseline.", short)
	case Warning:
		d.Icon, d.Title = "⚠️", fmt.Sprintf("perfgate / %s: performance regression (warning)", v.Tier)
		d.Lead = fmt.Sprintf("%s is slower than the baseline beyond the threshold, the noise band and the statistical test.", short)
		if !v.Deadline.IsZero() {
			d.Escalation = fmt.Sprintf("This check is **neutral** until **%s**; unresolved by then, it turns into a blocking failure.", formatTime(v.Deadline))
		}
	case Escalated:
		d.Icon, d.Title = "❌", fmt.Sprintf("perfgate / %s: performance regression (blocking)", v.Tier)
		d.Lead = fmt.Sprintf("%s is slower than the baseline, and the regression was not resolved within %s.", short, formatDuration(v.EscalateAfter))
	case Accepted:
		d.Icon, d.Title = "🟦", fmt.Sprintf("perfgate / %s: regression accepted on appeal", v.Tier)
		d.Lead = fmt.Sprintf("A maintainer accepted the regression of %s; it is recorded in the audit log. The baseline does not move without its own review.", short)
	case Inconclusive:
		d.Icon, d.Title = "❔", fmt.Sprintf("perfgate / %s: inconclusive", v.Tier)
		d.Lead = fmt.Sprintf("The runs of %s could not settle whether it regressed. This does not block the PR.", short)
		if v.NeedsAck {
			d.Lead = fmt.Sprintf("The runs of %s could not settle whether it regressed. This tier does not pass an inconclusive result: the check needs action until a maintainer acknowledges it or more runs decide.", short)
		}
	case Skipped:
		d.Icon, d.Title = "⏭️", fmt.Sprintf("perfgate / %s: skipped", v.Tier)
		d.Lead = "This PR changes no files that match the repository's perfgate paths, so nothing was measured."
	case Broken:
		d.Icon, d.Title = "🛑", fmt.Sprintf("perfgate / %s: could not run", v.Tier)
		d.Lead = "perfgate could not measure this commit:\n\n" + quoteLines(v.Problems)
	}
	if v.Headline != "" && v.Verdict != Accepted {
		// A gate verdict leads with the document's own sentence, which
		// names the rows and the rule that decided.
		d.Lead = short + ": " + v.Headline
	}
	switch v.Verdict {
	case Warning, Escalated:
		d.NextSteps = []string{
			"Push a fix: the new commit is measured again and the clock restarts.",
			"Comment `/perf retest` to measure this commit again on the same runner; the new runs are added to the evidence.",
			"Comment `/perf appeal <reason>` to explain why the regression is acceptable; a maintainer answers `/perf appeal accept` or `/perf appeal reject`.",
		}
	case Inconclusive:
		d.NextSteps = []string{"Comment `/perf retest` to add runs: they join the evidence and narrow the interval (retesting cannot turn noise into a verdict; the details say how)."}
		if v.NeedsAck {
			d.NextSteps = append(d.NextSteps, "A maintainer who accepts the uncertainty comments `/perf ack`; it is recorded in the audit log.")
		}
	case Broken:
		d.NextSteps = []string{"Fix the problem above and push, or comment `/perf retest` if it was the runner's fault."}
	}
	if longRun(v.Tier) {
		d.NextSteps = longRunSteps(v)
	}
	return d
}

// longRun reports whether tier is a capacity or soak check, which runs
// when a maintainer asks (`/perf capacity`, `/perf soak`), not on a push
// or a retest.
func longRun(tier string) bool { return check.Tier(tier).LongRun() }

// longRunSteps is what can follow a long run's verdict.
func longRunSteps(v View) []string {
	again := fmt.Sprintf("A maintainer measures again with `/perf %s` (it holds a card for a long while, so it runs on request).", v.Tier)
	switch v.Verdict {
	case Warning, Escalated:
		return []string{
			fmt.Sprintf("Push a fix; a maintainer then measures the new commit with `/perf %s`.", v.Tier),
			"Comment `/perf appeal <reason>` to explain why the regression is acceptable; a maintainer answers `/perf appeal accept` or `/perf appeal reject`.",
		}
	case Inconclusive:
		return []string{again}
	}
	return nil
}

func commentDataOf(v View) commentData {
	icon := "⚠️"
	if v.Verdict == Escalated {
		icon = "❌"
	}
	return commentData{
		View: v, Icon: icon, ShortSHA: shortSHA(v.SHA), Deadline: formatTime(v.Deadline),
		EscalateAfterText: formatDuration(v.EscalateAfter),
		Escalated:         v.Verdict == Escalated, TableRows: table(firstScreen(v.Rows)), DetailRows: detailTable(v.Rows),
		costLines: costLinesOf(v), Actions: actions(v),
	}
}

// actions is the comment's line of what the author can do.
func actions(v View) string {
	if longRun(v.Tier) {
		return fmt.Sprintf("push a fix (a maintainer measures the new commit with `/perf %s`) · `/perf appeal <reason>` (a maintainer answers `/perf appeal accept` or `reject`)", v.Tier)
	}
	return "push a fix (the new commit is measured and the clock restarts) · `/perf retest` (adds runs to the evidence) · `/perf appeal <reason>` (a maintainer answers `/perf appeal accept` or `reject`)"
}

// firstScreen is what an author reads first: the rows that decided (a
// regression, an improvement, an open question), or every row when all
// passed.
func firstScreen(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Matters {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return rows
	}
	return out
}

// table is the author's table: values, change, threshold, verdict.
func table(rows []Row) []tableRow {
	if len(rows) == 0 {
		return nil
	}
	header := []string{"metric", "baseline", "this commit", "Δ", "threshold", "verdict"}
	right := []bool{false, true, true, true, true, false}
	cells := [][]string{header}
	for _, r := range rows {
		cells = append(cells, []string{r.Metric, r.Baseline, r.Candidate, r.Delta, r.Threshold, r.Verdict})
	}
	return aligned(cells, right)
}

// detailTable is the maintainer's table: the change with the interval of
// the rule that decided, the noise band, the smallest change the evidence
// could call, and the rule in words. Rows built by hand (not from a
// verdict document) have none of it and get no detail table.
func detailTable(rows []Row) []tableRow {
	if len(rows) == 0 || rows[0].Interval == "" {
		return nil
	}
	header := []string{"metric", "Δ", "interval", "noise", "detectable", "verdict", "decided by"}
	right := []bool{false, true, true, true, true, false, false}
	cells := [][]string{header}
	for _, r := range rows {
		cells = append(cells, []string{r.Metric, r.Delta, orDash(r.Interval), orDash(r.Noise), orDash(r.Detectable), r.Verdict, orDash(r.Rule)})
	}
	return aligned(cells, right)
}

// aligned pads every cell so the raw markdown lines up as well as the
// rendered table; numeric columns are right-aligned.
func aligned(cells [][]string, right []bool) []tableRow {
	width := make([]int, len(right))
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c), 3)
		}
	}
	out := make([]tableRow, 0, len(cells)+1)
	for n, row := range cells {
		padded := make([]string, len(row))
		for i, c := range row {
			padded[i] = pad(c, width[i], right[i])
		}
		out = append(out, tableRow{Cells: padded})
		if n == 0 {
			sep := make([]string, len(right))
			for i := range right {
				if right[i] {
					sep[i] = strings.Repeat("-", width[i]-1) + ":"
				} else {
					sep[i] = ":" + strings.Repeat("-", width[i]-1)
				}
			}
			out = append(out, tableRow{Cells: sep})
		}
	}
	return out
}

func pad(s string, w int, right bool) string {
	gap := strings.Repeat(" ", w-utf8.RuneCountInString(s))
	if right {
		return gap + s
	}
	return s + gap
}

func quoteLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("> " + l + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func shortSHA(sha string) string {
	if sha == "" {
		return "this commit"
	}
	return "`" + rev.Short(sha) + "`"
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func formatDuration(d time.Duration) string {
	if d > 0 && d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return d.String()
}
