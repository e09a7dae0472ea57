package server

import (
	"runtime/debug"
	"testing"
)

// The server collects at GCPercent unless GOGC is set, which it leaves in
// force.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tt := range []struct {
		name    string
		gogc    string
		current int // what the runtime runs at before (GOGC is read at start-up)
		want    int
	}{
		{"GOGC unset", "", 100, GCPercent},
		{"GOGC set", "150", 150, 150},
		{"GOGC=off", "off", -1, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			debug.SetGCPercent(tt.current)
			if got := TuneGC(); got != tt.want {
				t.Errorf("TuneGC() = %d, want %d", got, tt.want)
			}
			if got := debug.SetGCPercent(tt.want); got != tt.want {
				t.Errorf("in force: %d, want %d", got, tt.want)
			}
		})
	}
}
