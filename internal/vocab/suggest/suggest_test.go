package suggest

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	opts := []string{"endpoint", "num-prompts", "model", "log-level", "serve", "simulate-gate", "sim", "baseline"}
	tests := []struct{ word, want string }{
		{"endpont", "endpoint"},  // one deletion
		{"enpdoint", "endpoint"}, // a transposition is one edit
		{"num-promts", "num-prompts"},
		{"modle", "model"},
		{"serv", "serve"},
		{"simulate", "simulate-gate"}, // unique prefix
		{"basline", "baseline"},
		{"xyz", ""}, // nothing close
		{"zzzzzzzzzz", ""},
		{"LOG-LEVEL", "log-level"},
	}
	for _, tt := range tests {
		if got := Closest(tt.word, opts); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
}
