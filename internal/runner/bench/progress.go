package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress is a one-line bar redrawn with \r. It draws only on a terminal:
// in CI logs or a redirected file it would be noise.
type progress struct {
	w     io.Writer
	total int
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

// newProgress returns a bar, or a silent one when w is nil or not a terminal.
func newProgress(w io.Writer, total int) *progress {
	p := &progress{total: total, start: time.Now()}
	if w == nil || !isTerminal(w) {
		return p
	}
	p.w = w
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// add counts one finished request; cheap enough for the request path.
func (p *progress) add() { p.done.Add(1) }

// finish draws the final state and ends the line.
func (p *progress) finish() {
	if p.w == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *progress) draw() {
	fmt.Fprint(p.w, "\r"+p.line(int(p.done.Load()), time.Since(p.start)))
}

// line renders e.g. " 37% |███████           | 370/1000 [00:04, 92.1 req/s]".
func (p *progress) line(done int, elapsed time.Duration) string {
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	fill := int(frac * width)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	sec := int(elapsed.Seconds())
	return fmt.Sprintf("%3.0f%% |%s%s| %d/%d [%02d:%02d, %.1f req/s]",
		frac*100, strings.Repeat("█", fill), strings.Repeat(" ", width-fill),
		done, p.total, sec/60, sec%60, rate)
}
