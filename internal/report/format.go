package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatValue prints a metric value with its unit and a precision that suits
// its size: "12.34 ms", "1,234.5 tok/s", "0.20 %".
func FormatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	var s string
	switch a := math.Abs(v); {
	case a >= 1000:
		s = thousands(strconv.FormatFloat(v, 'f', 1, 64))
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit == "" {
		return s
	}
	if unit == "%" {
		return s + "%"
	}
	return s + " " + unit
}

// FormatDelta prints a relative change with its sign: "+8.1%", "−3.2%",
// "0.0%". The minus is U+2212 so it reads as a sign, not a hyphen.
func FormatDelta(rel float64) string {
	if math.IsNaN(rel) || math.IsInf(rel, 0) {
		return "n/a"
	}
	p := rel * 100
	switch {
	case p >= 0.05:
		return fmt.Sprintf("+%.1f%%", p)
	case p <= -0.05:
		return fmt.Sprintf("−%.1f%%", -p)
	}
	return "0.0%"
}

// FormatThreshold prints the worse direction and the limit: "+5%" for a
// latency (higher is worse), "−5%" for a throughput (lower is worse).
func FormatThreshold(limit float64, higherIsWorse bool) string {
	p := strconv.FormatFloat(limit*100, 'f', -1, 64)
	if higherIsWorse {
		return "+" + p + "%"
	}
	return "−" + p + "%"
}

func thousands(s string) string {
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
