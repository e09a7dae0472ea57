// Package figure prints the numbers people read: values with their units,
// signed changes, thresholds, noise bands and confidence levels. It is the
// one formatter every surface uses (the check run, the PR comment, the
// pages, the CLI), so the same number never reads two ways. It computes
// nothing: each function prints the value it is given.
package figure

import (
	"math"
	"strconv"
	"strings"
)

// Minus is the sign of a negative change: U+2212 reads as a sign, not a
// hyphen.
const Minus = "−"

// Value prints a metric value with its unit and a precision that suits its
// size: "12.34 ms", "1,234.5 tok/s", "0.20%".
func Value(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	var s string
	switch a := math.Abs(v); {
	case a >= 1000:
		s = Thousands(strconv.FormatFloat(v, 'f', 1, 64))
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.1 || a == 0:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	s = strings.Replace(s, "-", Minus, 1)
	switch unit {
	case "":
		return s
	case "%":
		return s + "%"
	}
	return s + " " + unit
}

// Change prints a relative change (a fraction) with its sign: "+8.1%",
// "−3.2%", "0.0%".
func Change(rel float64) string {
	if math.IsNaN(rel) || math.IsInf(rel, 0) {
		return "n/a"
	}
	p := rel * 100
	switch {
	case p >= 0.05:
		return "+" + strconv.FormatFloat(p, 'f', 1, 64) + "%"
	case p <= -0.05:
		return Minus + strconv.FormatFloat(-p, 'f', 1, 64) + "%"
	}
	return "0.0%"
}

// Points prints a change of a rate (a fraction) in percentage points:
// "+0.20 pt", "−1.50 pt", "0.00 pt".
func Points(diff float64) string {
	if math.IsNaN(diff) || math.IsInf(diff, 0) {
		return "n/a"
	}
	p := diff * 100
	switch {
	case p >= 0.005:
		return "+" + strconv.FormatFloat(p, 'f', 2, 64) + " pt"
	case p <= -0.005:
		return Minus + strconv.FormatFloat(-p, 'f', 2, 64) + " pt"
	}
	return "0.00 pt"
}

// Threshold prints a limit (a positive fraction) signed the way the metric
// gets worse: "+5%" for a latency, "−15%" for a throughput; in points when
// points is set.
func Threshold(limit float64, worseIsHigher, points bool) string {
	sign := "+"
	if !worseIsHigher {
		sign = Minus
	}
	p := strconv.FormatFloat(limit*100, 'f', -1, 64)
	if points {
		return sign + p + " pt"
	}
	return sign + p + "%"
}

// Band prints a noise band (a non-negative fraction): "±3.1%", "±0.40 pt".
func Band(width float64, points bool) string {
	if points {
		return "±" + strings.TrimPrefix(Points(math.Abs(width)), "+")
	}
	return "±" + strings.TrimPrefix(Change(math.Abs(width)), "+")
}

// Level prints a probability or confidence level with three significant
// digits: "99.5%", "96.4%", "0.263%".
func Level(p float64) string {
	if math.IsNaN(p) || math.IsInf(p, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(100*p, 'g', 3, 64) + "%"
}

// P prints a p-value the way benchstat does: two digits, "<0.001" below.
func P(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return strconv.FormatFloat(p, 'g', 2, 64)
}

// Thousands puts commas between the thousands of a decimal number's
// integer part: "1234567.5" → "1,234,567.5".
func Thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// PIs prints "p=0.023", or "p<0.001".
func PIs(p float64) string {
	if s := P(p); strings.HasPrefix(s, "<") {
		return "p" + s
	}
	return "p=" + P(p)
}

// Plural is one when n is 1 and many otherwise: the word, or the ending,
// that agrees with a count ("1 metric", "2 metrics"; "1 decision", "3
// decisions"; of a verb, "it differs", "they differ").
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
