package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// Job log limits: what one upload carries and what one job keeps (the
// server's cap, trailer included).
const (
	logChunk   = 512 << 10
	maxJobLog  = agentapi.MaxJobLog
	logTrailer = "\n[job log truncated at 16 MiB]\n"
)

// jobLog is one job's log: every line is kept and sent to the server in
// offset-addressed chunks, and copied to the agent's own output.
type jobLog struct {
	client *agentapi.Client
	jobID  int64
	lease  string
	copyTo io.Writer
	every  time.Duration

	mu        sync.Mutex
	buf       []byte
	truncated bool
	sent      int64 // what the server has acknowledged
	lost      bool  // the lease is gone: stop sending

	sendMu sync.Mutex // one upload at a time
	quit   chan struct{}
}

func newJobLog(c *agentapi.Client, jobID int64, lease string, copyTo io.Writer, every time.Duration) *jobLog {
	return &jobLog{client: c, jobID: jobID, lease: lease, copyTo: copyTo, every: every, quit: make(chan struct{})}
}

// Write implements io.Writer for the job's zerolog logger.
// The agent's own output (copyTo) gets what the job log keeps, so one job
// costs it at most the job log's cap however many engines the job starts.
func (l *jobLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := p
	switch {
	case l.truncated:
		keep = nil
	case len(l.buf)+len(p) > maxJobLog-len(logTrailer):
		keep = []byte(logTrailer)
		l.truncated = true
	}
	l.buf = append(l.buf, keep...)
	if l.copyTo != nil && len(keep) > 0 {
		_, _ = l.copyTo.Write(keep)
	}
	return len(p), nil
}

// start sends the log every interval until stop.
func (l *jobLog) start(ctx context.Context) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.quit:
				return
			case <-t.C:
				_ = l.flush(ctx)
			}
		}
	}()
	return done
}

func (l *jobLog) stop(done chan struct{}) {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-done
}

// flush sends everything not yet acknowledged. A 416 moves the offset to
// what the server has (a retried chunk that landed, or one that did not).
func (l *jobLog) flush(ctx context.Context) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	for range 1000 {
		l.mu.Lock()
		if l.lost || l.sent >= int64(len(l.buf)) {
			l.mu.Unlock()
			return nil
		}
		off := l.sent
		chunk := l.buf[off:min(int64(len(l.buf)), off+logChunk)]
		l.mu.Unlock()

		n, err := l.client.AppendLog(ctx, l.jobID, l.lease, off, chunk)
		var om *agentapi.OffsetMismatchError
		switch {
		case err == nil:
		case errors.As(err, &om):
			n = om.Length
		case errors.Is(err, agentapi.ErrLeaseLost):
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			return err
		case errors.Is(err, agentapi.ErrLogFull):
			// The server keeps no more of this job's log; the job goes on.
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			return nil
		default:
			return err
		}
		l.mu.Lock()
		if n > int64(len(l.buf)) {
			// The server has more than this agent wrote: nothing to resend.
			n = int64(len(l.buf))
		}
		l.sent = n
		l.mu.Unlock()
	}
	return fmt.Errorf("job %d log: gave up after 1000 chunks", l.jobID)
}
