package engine

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// OutputBudget is how many bytes of engine output may still be copied to
// a Spec's Output. A job that starts several engines (an interleaved
// job starts one per side and pair) shares one budget among them, so the
// job log and the agent's own log get at most the budget per job, not per
// start; the note that the rest was dropped is written once.
type OutputBudget struct {
	mu   sync.Mutex
	left int64
	cut  bool
}

// NewOutputBudget is a budget of n bytes.
func NewOutputBudget(n int64) *OutputBudget { return &OutputBudget{left: n} }

// take is how many of n bytes may pass, and whether the note is due now.
func (b *OutputBudget) take(n int64) (pass int64, note bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left > 0 {
		pass = min(n, b.left)
		b.left -= pass
		return pass, false
	}
	if !b.cut {
		b.cut = true
		return 0, true
	}
	return 0, false
}

// capWriter passes on what its budget allows, then one note that the
// rest was dropped.
type capWriter struct {
	w      io.Writer
	budget *OutputBudget
}

func (c *capWriter) Write(p []byte) (int, error) {
	n, note := c.budget.take(int64(len(p)))
	if n > 0 {
		if _, err := c.w.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	if note {
		fmt.Fprintln(c.w, "[perfgate: the engine's output reached its limit for this job; the rest is not copied here (its last part stays in the engine's in-memory tail)]")
	}
	return len(p), nil
}

// ringBuffer keeps the last limit bytes written to it. An engine can log
// for hours; the tail is what explains a failure.
type ringBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	start int // index of the oldest byte once the buffer is full
	total int64
}

func newRingBuffer(limit int) *ringBuffer {
	return &ringBuffer{limit: limit}
}

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.total += int64(n)
	if len(p) >= r.limit {
		r.buf = append(r.buf[:0], p[len(p)-r.limit:]...)
		r.start = 0
		return n, nil
	}
	if room := r.limit - len(r.buf); room > 0 {
		take := min(room, len(p))
		r.buf = append(r.buf, p[:take]...)
		p = p[take:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		c := copy(r.buf[r.start:], p)
		p = p[c:]
		r.start = (r.start + c) % r.limit
	}
	return n, nil
}

// Bytes is a copy of what the buffer holds, oldest first.
func (r *ringBuffer) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

// Total is how many bytes were ever written.
func (r *ringBuffer) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Tail is the last n lines, for error messages.
func (r *ringBuffer) Tail(n int) string {
	b := bytes.TrimRight(r.Bytes(), "\n")
	i := len(b)
	for ; n > 0 && i > 0; n-- {
		j := bytes.LastIndexByte(b[:i], '\n')
		if j < 0 {
			i = 0
			break
		}
		i = j
	}
	return string(bytes.TrimLeft(b[i:], "\n"))
}
