package figure

import "testing"

func TestFigures(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{Value(12.345, "ms"), "12.35 ms"},
		{Value(2205.33, "tok/s"), "2,205.3 tok/s"},
		{Value(-1234.5, "W"), "−1,234.5 W"},
		{Value(0.2, "%"), "0.20%"},
		{Value(0.004, "ms"), "0.004 ms"},
		{Value(0, ""), "0.00"},
		{Change(0.081), "+8.1%"},
		{Change(-0.032), "−3.2%"},
		{Change(0.0004), "0.0%"},
		{Points(0.002), "+0.20 pt"},
		{Points(-0.015), "−1.50 pt"},
		{Threshold(0.05, true, false), "+5%"},
		{Threshold(0.15, false, false), "−15%"},
		{Threshold(0.01, true, true), "+1 pt"},
		{Band(0.031, false), "±3.1%"},
		{Band(0.004, true), "±0.40 pt"},
		{Level(0.995), "99.5%"},
		{Level(0.9636), "96.4%"},
		{P(0.0001), "<0.001"},
		{P(0.0234), "0.023"},
		{Thousands("1234567.5"), "1,234,567.5"},
		{Plural(1, "metric", "metrics"), "metric"},
		{Plural(0, "metric", "metrics"), "metrics"},
		{Plural(2, "", "s"), "s"},
		{Plural(1, "s", ""), "s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
