package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// request is one prompt to send.
type request struct {
	id        string // X-Request-Id, "<runid>-<index>" so results align with server traces
	prompt    string
	promptLen int
	maxTokens int
}

// record is what one request measured: the equal of vLLM's RequestFuncOutput.
type record struct {
	ok        bool
	err       string
	connErr   bool // no response at all: the connection could not be made
	promptLen int  // from the dataset, or the server's usage.prompt_tokens
	usage     bool // the server sent a usage block
	usageOut  int  // usage.completion_tokens
	chunks    int  // content chunks received
	start     time.Time
	ttft      float64   // s, request sent → first content chunk
	latency   float64   // s, request sent → last content chunk (vLLM's "latency")
	itl       []float64 // s, gaps between consecutive content chunks
}

// outputTokens is the request's output length: the server's own count when
// it sent one, else the number of content chunks (one token each on the
// engines perfgate targets).
func (r *record) outputTokens() int {
	if r.usage && r.usageOut > 0 {
		return r.usageOut
	}
	return r.chunks
}

// requester sends requests to one OpenAI-compatible endpoint and times the
// streamed answer, like vLLM's async_request_openai_(chat_)completions.
type requester struct {
	client      *http.Client
	url         string
	chat        bool
	model       string
	temperature float64
	ignoreEOS   bool
	timeout     time.Duration // longest wait for the response or the next stream line
}

// errIdle is the cancel cause when the server went quiet for too long.
var errIdle = errors.New("idle timeout")

// payload is the request body; one struct serves both endpoints because
// omitempty drops the other endpoint's fields.
type payload struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages,omitempty"`
	Prompt              string        `json:"prompt,omitempty"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
	Temperature         float64       `json:"temperature"`
	Stream              bool          `json:"stream"`
	StreamOptions       streamOptions `json:"stream_options"`
	IgnoreEOS           bool          `json:"ignore_eos,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (q *requester) body(req request) ([]byte, error) {
	p := payload{
		Model:         q.model,
		MaxTokens:     req.maxTokens,
		Temperature:   q.temperature,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		IgnoreEOS:     q.ignoreEOS,
	}
	if q.chat {
		p.Messages = []chatMessage{{Role: "user", Content: req.prompt}}
		// vLLM's client sends max_completion_tokens for chat; older
		// servers read max_tokens, so send both with the same value.
		p.MaxCompletionTokens = req.maxTokens
	} else {
		p.Prompt = req.prompt
	}
	return json.Marshal(p)
}

// do sends one request and fills rec. It never returns an error: every
// fault becomes rec.err, so one bad request cannot stop the benchmark.
func (q *requester) do(ctx context.Context, req request, rec *record) {
	rec.promptLen = req.promptLen
	body, err := q.body(req)
	if err != nil {
		rec.err = fmt.Sprintf("encode request: %v", err)
		return
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, q.url, bytes.NewReader(body))
	if err != nil {
		rec.err = fmt.Sprintf("build request: %v", err)
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("X-Request-Id", req.id)

	st := time.Now()
	rec.start = st
	wd := startWatchdog(st, q.timeout, cancel)
	defer wd.stop()
	resp, err := q.client.Do(hreq)
	if err != nil {
		rec.err, rec.connErr = q.transportError(ctx, err, false)
		return
	}
	defer resp.Body.Close()
	wd.touch(time.Now())

	if resp.StatusCode != http.StatusOK {
		rec.err = statusError(resp)
		return
	}

	br := readerPool.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()

	if req.maxTokens > 1 && req.maxTokens <= 4096 {
		rec.itl = make([]float64, 0, req.maxTokens-1)
	}
	done, rerr := readStream(br, rec, st, wd)
	if rerr != nil {
		rec.err, _ = q.transportError(ctx, rerr, true)
		return
	}
	if rec.err != "" {
		return
	}
	if done {
		// Read to the end so the transport can reuse the connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(br, 64<<10))
	}
	if rec.chunks == 0 {
		rec.err = "stream ended without a content chunk; no TTFT"
		return
	}
	rec.ok = true
}

// readStream consumes SSE lines into rec until [DONE] (done), the end of
// the body, a read error (rerr) or a fault in the stream (rec.err). It is
// the per-token hot path: no allocation beyond rec.itl's growth, one clock
// read and one atomic store per line.
func readStream(br *bufio.Reader, rec *record, st time.Time, wd *watchdog) (done bool, rerr error) {
	var (
		c       chunk
		last    time.Time
		scratch []byte
	)
	for {
		line, err := readLine(br, &scratch)
		if len(line) > 0 {
			now := time.Now()
			if wd != nil {
				wd.touch(now)
			}
			switch {
			case line[0] == ':': // SSE comment, used as keep-alive ping
			case bytes.HasPrefix(line, dataPrefix):
				data := line[len(dataPrefix):]
				if len(data) > 0 && data[0] == ' ' {
					data = data[1:]
				}
				if bytes.Equal(data, doneMarker) {
					return true, nil
				}
				if err := parseChunk(data, &c); err != nil {
					rec.err = malformed(err)
					return false, nil
				}
				if c.errMsg != "" {
					rec.err = "server error in stream: " + c.errMsg
					return false, nil
				}
				if c.content {
					if rec.chunks == 0 {
						rec.ttft = now.Sub(st).Seconds()
					} else {
						rec.itl = append(rec.itl, now.Sub(last).Seconds())
					}
					rec.chunks++
					last = now
					// vLLM's latency ends at the last token, not at [DONE].
					rec.latency = now.Sub(st).Seconds()
				}
				if c.hasUsage {
					rec.usage = true
					rec.usageOut = c.completionTokens
					if c.promptTokens > 0 {
						rec.promptLen = c.promptTokens
					}
				}
			case bytes.HasPrefix(line, eventPrefix), bytes.HasPrefix(line, idPrefix), bytes.HasPrefix(line, retryPrefix):
			default:
				rec.err = malformed(errors.New("not an SSE field"))
				return false, nil
			}
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

var (
	dataPrefix  = []byte("data:")
	eventPrefix = []byte("event:")
	idPrefix    = []byte("id:")
	retryPrefix = []byte("retry:")
	doneMarker  = []byte("[DONE]")
)

// readerPool holds the per-stream line readers. 2 KiB fits ten sim-sized
// chunks and keeps memory per open stream low; a longer line still works,
// through readLine's scratch buffer.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 2048) }}

// readLine returns the next line without its line ending. The slice is
// only valid until the next call. A line longer than the reader's buffer is
// gathered in *scratch.
func readLine(br *bufio.Reader, scratch *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append((*scratch)[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		*scratch = buf
		line = buf
	}
	n := len(line)
	for n > 0 && (line[n-1] == '\n' || line[n-1] == '\r') {
		n--
	}
	return line[:n], err
}

// transportError words a failed send or read. conn reports a failure to
// connect at all, which Run uses to tell "target never answered".
func (q *requester) transportError(ctx context.Context, err error, streaming bool) (msg string, conn bool) {
	if errors.Is(context.Cause(ctx), errIdle) {
		if streaming {
			return fmt.Sprintf("stream stalled: no data for %s", q.timeout), false
		}
		return fmt.Sprintf("no response within %s", q.timeout), false
	}
	if ctx.Err() != nil {
		return "canceled", false
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var oerr *net.OpError
	var derr *net.DNSError
	conn = !streaming && ((errors.As(err, &oerr) && oerr.Op == "dial") || errors.As(err, &derr))
	if streaming {
		return "read stream: " + err.Error(), false
	}
	return err.Error(), conn
}

// statusError words a non-200 answer from the message in its JSON error
// body, or its text.
func statusError(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := errorMessage(body)
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)
}

// watchdog cancels a request once the server has been silent for timeout.
// It re-arms itself until the silence is real, so the per-line cost on the
// hot path is one atomic store rather than a timer reset.
type watchdog struct {
	st      time.Time
	timeout time.Duration
	last    atomic.Int64 // ns after st of the last sign of life
	t       *time.Timer
	cancel  context.CancelCauseFunc
}

func startWatchdog(st time.Time, timeout time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{st: st, timeout: timeout, cancel: cancel}
	w.t = time.AfterFunc(time.Duration(math.MaxInt64), w.fire)
	w.t.Reset(timeout)
	return w
}

func (w *watchdog) touch(now time.Time) { w.last.Store(int64(now.Sub(w.st))) }

func (w *watchdog) stop() { w.t.Stop() }

func (w *watchdog) fire() {
	idle := time.Since(w.st) - time.Duration(w.last.Load())
	if idle < w.timeout {
		w.t.Reset(w.timeout - idle)
		return
	}
	w.cancel(errIdle)
}
