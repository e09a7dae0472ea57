package profile

import (
	"fmt"
	"io"
	"strings"
)

// Markdown renders the diff: a table of every metric (a change too small to
// name prints "~", as benchstat does), the busy time by step kind, and the
// findings.
func (d Diff) Markdown() string {
	var b strings.Builder
	b.WriteString("#### Where the time went (scheduler profile, base → head)\n\n")
	b.WriteString("| | base | head | change |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| steps | %d | %d | |\n", d.Base.Steps, d.Head.Steps)
	for _, c := range d.Changes {
		change := "~"
		if c.Notable {
			sign := "+"
			if c.Rel < 0 {
				sign = "−"
			}
			change = sign + percent(abs(c.Rel))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Row, c.BaseText, c.HeadText, change)
	}
	b.WriteString("\n")
	writeShares(&b, "base", d.Base)
	writeShares(&b, "head", d.Head)
	b.WriteString("\n")
	if len(d.Findings) == 0 {
		b.WriteString("No scheduler change beyond ±20%.\n")
		return b.String()
	}
	b.WriteString("Findings:\n")
	for _, c := range d.Findings {
		fmt.Fprintf(&b, "- %s%s.\n", strings.ToUpper(c.Sentence[:1]), c.Sentence[1:])
	}
	return b.String()
}

// WriteMarkdown writes Markdown to w.
func (d Diff) WriteMarkdown(w io.Writer) error {
	_, err := io.WriteString(w, d.Markdown())
	return err
}

func writeShares(b *strings.Builder, name string, s Summary) {
	fmt.Fprintf(b, "Busy time, %s: decode-only %.0f%% · mixed %.0f%% · prefill-only %.0f%%; batch sizes %s.\n",
		name, 100*s.DecodeShare(), 100*s.MixedShare(), 100*s.PrefillShare(), batchHist(s))
}

// batchHist prints the non-empty batch-size buckets as "≤8: 40%".
func batchHist(s Summary) string {
	if s.Steps == 0 {
		return "none"
	}
	var parts []string
	lo := 1
	for i, n := range s.BatchHist {
		if n > 0 {
			label := fmt.Sprintf(">%d", BatchBuckets[len(BatchBuckets)-1])
			if i < len(BatchBuckets) {
				if lo == BatchBuckets[i] {
					label = fmt.Sprintf("%d", lo)
				} else {
					label = fmt.Sprintf("%d–%d", lo, BatchBuckets[i])
				}
			}
			pct := fmt.Sprintf("%.0f%%", 100*float64(n)/float64(s.Steps))
			if 100*n < s.Steps {
				pct = "<1%"
			}
			parts = append(parts, label+": "+pct)
		}
		if i < len(BatchBuckets) {
			lo = BatchBuckets[i] + 1
		}
	}
	return strings.Join(parts, ", ")
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
