package tokenize

import "testing"

func TestCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"   ", 0},
		{"one", 1},
		{"one two", 2},
		{"  lead and trail  ", 3},
		{"tabs\tand\nnewlines", 3},
		{"ünï côdé", 2},
	}
	for _, tt := range tests {
		if got := Count(tt.in); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
