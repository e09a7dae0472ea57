package config

import (
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written like 48h, 90m or 2d.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String prints 48h, 10m, 1h30m.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Percent is a fraction written as a percentage: "5%" is 0.05.
type Percent float64

// String prints 5%.
func (p Percent) String() string { return strconv.FormatFloat(float64(p)*100, 'g', 4, 64) + "%" }
