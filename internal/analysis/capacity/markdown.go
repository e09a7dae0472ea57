package capacity

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Markdown writes the sweeps behind a capacity verdict, for the
// maintainer's details: the SLO, the light-load latencies (which a knee
// change must not be confused with), and the latency–throughput curve of
// base and head as one table, one row per offered rate, the knees marked
// ◆. The verdict itself — the knees, the change, the rule — is the verdict
// document's (longrun.Capacity), told by every surface the same way.
func Markdown(w io.Writer, base, head *Sweep) error {
	var b strings.Builder
	fmt.Fprintf(&b, "SLO: %s.\n\n", sloText(head.SLO))
	if bl, hl, ok := lightLoad(base, head); ok {
		fmt.Fprintf(&b, "Light load (%s req/s): TTFT p50 %s → %s, TPOT p50 %s → %s.\n\n",
			rateText(bl.Rate), ms(bl.TTFTp50ms), ms(hl.TTFTp50ms), ms(bl.TPOTp50ms), ms(hl.TPOTp50ms))
	}
	b.WriteString("| offered req/s | base served req/s | base TTFT p99 | base TPOT p50 | base good | head served req/s | head TTFT p99 | head TPOT p50 | head good |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	bk, hk := base.Knee(), head.Knee()
	for _, r := range rates(base, head) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", rateText(r), cells(base, r, bk), cells(head, r, hk))
	}
	b.WriteString("\n◆ the knee: the highest rate sustained below the lowest that was not; ✓ sustained, ✗ not.\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write capacity markdown: %w", err)
	}
	return nil
}

// MarkdownHead writes the sweep of one commit with no base to compare
// (the nightly's): the SLO and its curve.
func MarkdownHead(w io.Writer, head *Sweep) error {
	var b strings.Builder
	fmt.Fprintf(&b, "SLO: %s; no base was swept.\n\n", sloText(head.SLO))
	b.WriteString("| offered req/s | served req/s | TTFT p99 | TPOT p50 | good |\n|---:|---:|---:|---:|---:|\n")
	k := head.Knee()
	for _, r := range rates(head) {
		fmt.Fprintf(&b, "| %s | %s |\n", rateText(r), cells(head, r, k))
	}
	b.WriteString("\n◆ the knee: the highest rate sustained below the lowest that was not; ✓ sustained, ✗ not.\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write capacity markdown: %w", err)
	}
	return nil
}

// cells are one side's four columns at rate r, blank when not measured.
func cells(s *Sweep, r float64, k Knee) string {
	j, ok := s.at(r)
	if !ok {
		return " | | | "
	}
	mark := "✗"
	if j.Sustained {
		mark = "✓"
	}
	if r == k.Rate && r > 0 {
		mark += " ◆"
	}
	return fmt.Sprintf("%.2f | %s | %s | %.0f%% %s", j.Throughput, ms(j.TTFTp99ms), ms(j.TPOTp50ms), 100*j.GoodFraction(), mark)
}

// at is the step measured at rate r (the last, if twice).
func (s *Sweep) at(r float64) (Judged, bool) {
	for i := len(s.Steps) - 1; i >= 0; i-- {
		if s.Steps[i].Rate == r && s.Steps[i].Distorted == "" {
			return s.Steps[i], true
		}
	}
	return Judged{}, false
}

// rates is every rate either side measured, ascending.
func rates(sweeps ...*Sweep) []float64 {
	var out []float64
	for _, s := range sweeps {
		for _, j := range s.Steps {
			out = append(out, j.Rate)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// lightLoad is both sides' step at the lowest rate both measured.
func lightLoad(base, head *Sweep) (Judged, Judged, bool) {
	for _, r := range rates(base, head) {
		b, okb := base.at(r)
		h, okh := head.at(r)
		if okb && okh {
			return b, h, true
		}
	}
	return Judged{}, Judged{}, false
}

func sloText(s SLO) string {
	var parts []string
	if s.TTFTms > 0 {
		parts = append(parts, "TTFT ≤ "+ms(s.TTFTms))
	}
	if s.TPOTms > 0 {
		parts = append(parts, "TPOT ≤ "+ms(s.TPOTms))
	}
	if s.E2ELms > 0 {
		parts = append(parts, "E2E ≤ "+ms(s.E2ELms))
	}
	return fmt.Sprintf("%s for %.0f%% of requests, ≤ %.0f%% failed", strings.Join(parts, ", "), 100*s.MinGoodFraction, 100*s.MaxErrorRate)
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}
