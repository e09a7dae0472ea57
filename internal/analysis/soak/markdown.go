package soak

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes the check run's soak section: the verdict, then one row
// per trend with its slope, limit and reason.
func Markdown(w io.Writer, r Report) error {
	var b strings.Builder
	verdict := "pass"
	if !r.Pass {
		verdict = "fail"
	}
	fmt.Fprintf(&b, "### Soak: %s\n\n", verdict)
	fmt.Fprintf(&b, "%.0f s of steady load, trends fitted by Theil–Sen after the warm-up.\n\n", r.DurationS)
	b.WriteString("| trend | per hour | limit | samples | status | why |\n|---|---:|---:|---:|---|---|\n")
	for _, t := range r.Trends {
		per := signed(t.PerHour) + unitText(t.Unit)
		lim := "–"
		if t.Limit != 0 {
			lim = num(t.Limit) + unitText(t.Unit)
		}
		if t.Name == ttftSeries.name || t.Name == tpotSeries.name {
			per = signed(100*t.PerHour) + "%"
			if t.Limit != 0 {
				lim = num(100*t.Limit) + "%"
			}
		}
		if t.Status == NotMeasured {
			per = "–"
		}
		mark := string(t.Status)
		if t.Status == Fail {
			mark = "**fail**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s |\n", t.Name, per, lim, t.Samples, mark, t.Why)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write soak markdown: %w", err)
	}
	return nil
}
