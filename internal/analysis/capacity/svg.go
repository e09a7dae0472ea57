package capacity

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// SVG geometry.
const (
	svgW, svgH             = 640, 360
	padL, padR, padT, padB = 64, 16, 28, 44
	baseColour, headColour = "#1f77b4", "#d62728"
	sustainedR             = 4
)

// SVG draws the latency–throughput curves: served requests/s across, TTFT
// p99 up (log scale: past the knee it grows by orders of magnitude), one
// line per side, filled points where the rate was sustained, hollow where
// not, a dashed line through each knee's point and the TTFT SLO as a grey line. The
// dashboard's check page embeds it as is.
func SVG(w io.Writer, base, head *Sweep) error {
	var b strings.Builder
	maxX, minY, maxY := 0.0, math.Inf(1), 0.0
	for _, s := range []*Sweep{base, head} {
		if s == nil {
			continue // a sweep of the head alone (the nightly)
		}
		for _, j := range s.Steps {
			maxX = math.Max(maxX, math.Max(j.Throughput, j.Rate))
			if j.TTFTp99ms > 0 {
				minY, maxY = math.Min(minY, j.TTFTp99ms), math.Max(maxY, j.TTFTp99ms)
			}
		}
	}
	if slo := head.SLO.TTFTms; slo > 0 {
		minY, maxY = math.Min(minY, slo), math.Max(maxY, slo)
	}
	if maxX == 0 || maxY == 0 {
		minY, maxY, maxX = 1, 10, 1
	}
	lminY, lmaxY := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
	if lmaxY <= lminY {
		lmaxY = lminY + 1
	}
	maxX *= 1.05
	x := func(v float64) float64 { return padL + v/maxX*(svgW-padL-padR) }
	y := func(v float64) float64 {
		v = math.Max(v, math.Pow(10, lminY))
		return padT + (lmaxY-math.Log10(v))/(lmaxY-lminY)*(svgH-padT-padB)
	}

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11" role="img" aria-label="latency–throughput curve, base and head">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", padL, padT, svgW-padL-padR, svgH-padT-padB)
	for e := lminY; e <= lmaxY; e++ {
		yy := y(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			padL, svgW-padR, yy, yy, padL-4, yy+4, ms(math.Pow(10, e)))
	}
	for i := 0; i <= 4; i++ {
		v := maxX * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.3g</text>`+"\n", x(v), svgH-padB+14, v)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">served requests/s</text>`+"\n", (svgW+padL)/2, svgH-8)
	fmt.Fprintf(&b, `<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">TTFT p99</text>`+"\n", (svgH)/2, svgH/2)
	if slo := head.SLO.TTFTms; slo > 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2 3"/><text x="%d" y="%.1f" text-anchor="end" fill="#666">SLO %s</text>`+"\n",
			padL, svgW-padR, y(slo), y(slo), svgW-padR-4, y(slo)-4, html.EscapeString(ms(slo)))
	}
	for i, side := range []struct {
		name   string
		s      *Sweep
		colour string
	}{{"base", base, baseColour}, {"head", head, headColour}} {
		if side.s == nil {
			continue
		}
		steps := append([]Judged(nil), side.s.Steps...)
		sortByRate(steps)
		var pts []string
		for _, j := range steps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(j.Throughput), y(j.TTFTp99ms)))
		}
		fmt.Fprintf(&b, `<g class="%s"><polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", side.name, side.colour, strings.Join(pts, " "))
		for _, j := range steps {
			fill := side.colour
			if !j.Sustained {
				fill = "white"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%d" fill="%s" stroke="%s"><title>%s: offered %s req/s, served %.2f, TTFT p99 %s, %.0f%% good</title></circle>`+"\n",
				x(j.Throughput), y(j.TTFTp99ms), sustainedR, fill, side.colour, side.name, rateText(j.Rate), j.Throughput, html.EscapeString(ms(j.TTFTp99ms)), 100*j.GoodFraction())
		}
		if j, ok := side.s.at(side.s.Knee().Rate); ok && j.Rate > 0 {
			kx := x(j.Throughput) // the knee step's point: the axis is served, not offered, rate
			fmt.Fprintf(&b, `<line class="knee" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-dasharray="5 4"/><text x="%.1f" y="%d" fill="%s" text-anchor="middle">%s knee %s</text>`+"\n",
				kx, kx, padT, svgH-padB, side.colour, kx, padT-6-12*i, side.colour, side.name, html.EscapeString(kneeText(side.s)))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write capacity svg: %w", err)
	}
	return nil
}

func sortByRate(js []Judged) {
	slices.SortStableFunc(js, func(a, b Judged) int { return cmp.Compare(a.Rate, b.Rate) })
}

// kneeText is a sweep's knee as the curve labels it: "8.72", "≥ 32".
func kneeText(s *Sweep) string {
	k := s.Knee()
	if k.Censored {
		return "≥ " + rateText(k.Rate)
	}
	return rateText(k.Rate)
}
