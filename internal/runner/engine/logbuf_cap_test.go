package engine

import (
	"bytes"
	"strings"
	"testing"
)

// What the engine prints reaches Output (the job log, the agent's log) up
// to the budget and then once more as a note: 100 MB of output costs the
// agent's log the budget, not 100 MB; and starts that share one budget (a
// job's engines) get the budget together, not each.
func TestCapWriter(t *testing.T) {
	t.Parallel()
	line := []byte(strings.Repeat("y", 1023) + "\n")
	for _, tc := range []struct {
		name          string
		starts        int
		linesPerStart int
		shared        bool
		want          int // bytes of output passed on, the note aside
	}{
		{"one start writing 100 MiB", 1, 100 << 10, false, 1 << 20},
		{"three starts sharing the job's budget", 3, 700, true, 1 << 20},
		{"three starts under the job's budget", 3, 100, true, 3 * 100 << 10},
		{"three starts with a budget each", 3, 700, false, 3 * 700 << 10},
	} {
		var out bytes.Buffer
		job := NewOutputBudget(1 << 20)
		for range tc.starts {
			b := job
			if !tc.shared {
				b = NewOutputBudget(1 << 20)
			}
			w := &capWriter{w: &out, budget: b}
			for range tc.linesPerStart {
				if n, err := w.Write(line); n != len(line) || err != nil {
					t.Fatalf("%s: write: %d, %v", tc.name, n, err)
				}
			}
		}
		notes := strings.Count(out.String(), "reached its limit")
		got := out.Len()
		if notes > 0 {
			got = strings.Index(out.String(), "[perfgate:")
		}
		if tc.shared || tc.starts == 1 {
			if got != tc.want {
				t.Errorf("%s: Output got %d bytes before the note, want %d", tc.name, got, tc.want)
			}
			if wantNotes := map[bool]int{true: 1, false: 0}[tc.starts*tc.linesPerStart<<10 > 1<<20]; notes != wantNotes {
				t.Errorf("%s: %d notes, want %d", tc.name, notes, wantNotes)
			}
		} else if out.Len()-notes*200 > tc.want || out.Len() < tc.want {
			t.Errorf("%s: Output got %d bytes, want %d", tc.name, out.Len(), tc.want)
		}
	}
}
