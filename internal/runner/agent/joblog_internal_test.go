package agent

import (
	"bytes"
	"strings"
	"testing"
)

// TestJobLogCopyCapped: the agent's own output gets what the job log
// keeps and no more: a job that writes 40 MiB costs it the job log's cap.
func TestJobLogCopyCapped(t *testing.T) {
	t.Parallel()
	var own bytes.Buffer
	l := newJobLog(nil, 1, "lease", &own, 0)
	line := []byte(strings.Repeat("z", 1023) + "\n")
	for range 40 << 10 {
		if n, err := l.Write(line); n != len(line) || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
	}
	if own.Len() > maxJobLog || own.Len() != len(l.buf) || !strings.HasSuffix(own.String(), logTrailer) {
		t.Errorf("the agent's output got %d bytes, the job log %d (cap %d), trailer %v", own.Len(), len(l.buf), maxJobLog, strings.HasSuffix(own.String(), logTrailer))
	}
}
