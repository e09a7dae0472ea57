package engine

import (
	"bytes"
	"strings"
	"testing"
)

// What the engine prints reaches Output (the job log, the agent's log) up
// to the limit and then once more as a note: 100 MB of output costs the
// agent's log the limit, not 100 MB.
func TestCapWriter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := &capWriter{w: &out, left: 1 << 20}
	line := []byte(strings.Repeat("y", 1023) + "\n")
	for range 100 << 10 { // 100 MiB
		if n, err := w.Write(line); n != len(line) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if out.Len() > 1<<20+200 || !strings.Contains(out.String(), "reached its limit") {
		t.Errorf("Output got %d bytes (limit 1 MiB), note present %v", out.Len(), strings.Contains(out.String(), "reached its limit"))
	}
	if strings.Count(out.String(), "reached its limit") != 1 {
		t.Error("the note is written more than once")
	}
}
