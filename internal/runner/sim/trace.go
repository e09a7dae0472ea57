package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// TraceRecord is one finished request as the engine saw it; Trace gets one
// JSON line of it per request. Status 499 means the client went away.
// Times are when the handler wrote the first and last token, the client's
// view less the network; CachedTokens are prompt tokens the prefix cache
// held at admission; Preemptions counts recomputes after the KV cache ran
// out.
type TraceRecord struct {
	RequestID        string `json:"request_id"`
	ArrivalUnixNS    int64  `json:"arrival_unix_ns"`
	FirstTokenUnixNS int64  `json:"first_token_unix_ns"`
	LastTokenUnixNS  int64  `json:"last_token_unix_ns"`
	PromptTokens     int    `json:"prompt_tokens"`
	OutputTokens     int    `json:"output_tokens"`
	CachedTokens     int    `json:"cached_tokens"`
	Preemptions      int    `json:"preemptions"`
	FinishReason     string `json:"finish_reason,omitempty"`
	Status           int    `json:"status"`
	Error            string `json:"error,omitempty"`
}

// traceWriter buffers records; after close it writes through, so handlers
// that finish late still land in the file.
type traceWriter struct {
	mu     sync.Mutex
	bw     *bufio.Writer
	enc    *json.Encoder
	closed bool
	err    error
}

func newTraceWriter(w io.Writer) *traceWriter {
	if w == nil {
		return nil
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	return &traceWriter{bw: bw, enc: json.NewEncoder(bw)}
}

func (t *traceWriter) write(r TraceRecord) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if err := t.enc.Encode(r); err != nil {
		t.err = err
		return
	}
	if t.closed {
		t.err = t.bw.Flush()
	}
}

func (t *traceWriter) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.err == nil {
		t.err = t.bw.Flush()
	}
	if t.err != nil {
		return fmt.Errorf("write trace: %w", t.err)
	}
	return nil
}
