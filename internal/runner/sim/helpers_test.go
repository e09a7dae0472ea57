package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// zeroConfig is an engine that never sleeps: tests of shapes and rules run
// flat out and never depend on timing.
func zeroConfig() Config {
	c := DefaultConfig().Quiet()
	c.BaseTTFT, c.PrefillPerToken, c.DecodeStep, c.PerSeqCost, c.PrefillStepOverhead = 0, 0, 0, 0, 0
	return c
}

// syncBuffer is a trace sink safe to read while handlers may still write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) records(t *testing.T) []TraceRecord {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []TraceRecord
	dec := json.NewDecoder(bytes.NewReader(b.buf.Bytes()))
	for dec.More() {
		var r TraceRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decode trace line: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// startEngine runs cfg behind a real loopback HTTP server.
func startEngine(t *testing.T, cfg Config) (*Engine, *httptest.Server) {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(e.Handler())
	t.Cleanup(func() {
		_ = e.Close()
		ts.Close()
	})
	return e, ts
}

func post(t *testing.T, ctx context.Context, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// testCtx ends with the test. Its deadline is go test's -timeout, not a
// few seconds of wall time: a loaded machine makes requests slow, never
// wrong, and a hung one still fails with every goroutine's stack.
func testCtx(t *testing.T) context.Context {
	return t.Context()
}

// sseEvent is one "data:" payload and when the client read it.
type sseEvent struct {
	data string
	at   time.Time
}

// readSSE reads data payloads until EOF; done reports a final [DONE].
func readSSE(t *testing.T, r io.Reader) (events []sseEvent, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		if done {
			t.Fatalf("data %q after [DONE]", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		events = append(events, sseEvent{data: data, at: time.Now()})
	}
	return events, done
}

func decodeMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return m
}
