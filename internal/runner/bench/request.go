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
	"net/http/httptrace"
	"net/url"
	"regexp"
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
	salt      string        // cache_salt of this request; "" sends the requester's
	model     string        // the model to name; "" names the requester's
	messages  []chatMessage // a chat session's conversation; nil sends prompt as one user message
	body      []byte        // the encoded request, when made ahead; nil: do encodes it
}

// record is what one request measured: the equal of vLLM's RequestFuncOutput.
type record struct {
	ok  bool
	err string
	// kind groups errors whose message differs per request (a cut
	// stream names its token count) into one row of the error table;
	// "" groups by err.
	kind    string
	status  int  // HTTP status of a refused request; 0 when none came
	connErr bool // no response at all: the connection could not be made
	// promptLen is the prompt's length as the dataset measured it;
	// usagePrompt is the server's usage.prompt_tokens (template included).
	promptLen   int
	usagePrompt int
	usage       bool // the server sent a usage block
	usageOut    int  // usage.completion_tokens
	counted     int  // output tokens counted with the server's tokenizer; 0 when not
	chunks      int  // stream chunks that carried output (token events)
	finished    bool // a chunk carried a finish_reason
	text        []byte
	// due is when the request was due to go (its arrival time had come
	// and a concurrency slot was free); start is when the client began
	// to send it (vLLM's start, which TTFT and latency count from); sent
	// is when its last byte was written to the socket, which is when the
	// server can see it (zero when it never was).
	due     time.Time
	start   time.Time
	sent    time.Time
	ttft    float64   // s, request sent → first token event
	latency float64   // s, request sent → last token event (vLLM's "latency")
	itl     []float64 // s, gaps between consecutive token events
	// engine is the engine's own clock for the request, where its API
	// reports one (Ollama's native answer); nil otherwise.
	engine *engineClock
	// engineITL are the gaps between the engine's own stamps of
	// consecutive tokens (Ollama's created_at), where it sends them.
	engineITL []float64
}

// outputTokens is the request's output length: the server's own count
// when it sent one, else the server tokenizer's count of the generated
// text, else the number of token events (one token each only when the
// server streams token by token).
func (r *record) outputTokens() (int, string) {
	switch {
	case r.usage && r.usageOut > 0:
		return r.usageOut, tokenSourceUsage
	case r.counted > 0:
		return r.counted, tokenSourceServer
	default:
		return r.chunks, tokenSourceChunks
	}
}

// errorRow is the request's row in the error table.
func (r *record) errorRow() string {
	if r.kind != "" {
		return r.kind
	}
	return r.err
}

// Token sources, as result.Section.TokenSource records them.
const (
	tokenSourceUsage  = "usage"
	tokenSourceServer = "server_tokenizer"
	tokenSourceChunks = "chunks"
	tokenSourceMixed  = "mixed"
	tokenSourceWords  = "whitespace"
)

// requester sends requests to one OpenAI-compatible endpoint and times the
// answer, like vLLM's async_request_openai_(chat_)completions.
type requester struct {
	client      *http.Client
	url         string
	chat        bool
	native      bool // Ollama's /api/generate, not an OpenAI-compatible endpoint
	stream      bool
	model       string
	temperature float64
	ignoreEOS   bool
	cacheSalt   string
	apiKey      string
	captureText bool          // keep the generated text (the server sends no usage)
	idle        time.Duration // longest wait for the response or the next stream line
	deadline    time.Duration // longest whole request, tokens flowing or not; 0: none
	maxLine     int           // longest SSE line (and non-streamed body) in bytes
}

// engineWords is what a request the engine ended cleanly, without a
// finish reason, leaves to quote: nothing. Ollama's OpenAI layer ends a
// stream this way when its runner stops a prediction early (31 repeats of
// one token, logged only at debug) and when a mid-stream error becomes an
// empty chunk.
const engineWords = "nothing: the engine closed the stream without a finish_reason, [DONE] or token counts"

// engineFailure says whether the request is the engine's own failure
// after it had streamed tokens: a stream the engine closed cleanly
// (every chunk whole, so no connection was cut mid-chunk) without
// finishing, or an error the engine reported in the stream. words are
// the engine's own, where it said any.
func (r *record) engineFailure() (words string, ok bool) {
	if r.ok || r.chunks == 0 {
		return "", false
	}
	if r.kind == errStreamCut {
		return engineWords, true
	}
	if w, found := strings.CutPrefix(r.err, errInStream); found {
		return w, true
	}
	return "", false
}

// errInStream prefixes an error the server reported inside the stream.
const errInStream = "server error in stream: "

// errStreamCut is the error-table row of every stream that ended without
// a terminal event, whatever its token count.
const errStreamCut = "stream ended early (no finish_reason, no [DONE]): cut by the server or a proxy"

// Cancel causes, told apart when the request fails.
var (
	errIdle     = errors.New("idle timeout")
	errDeadline = errors.New("request deadline")
)

// payload is the request body; one struct serves both endpoints because
// omitempty drops the other endpoint's fields.
type payload struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages,omitempty"`
	Prompt              string         `json:"prompt,omitempty"`
	MaxTokens           int            `json:"max_tokens"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Temperature         float64        `json:"temperature"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	IgnoreEOS           bool           `json:"ignore_eos,omitempty"`
	CacheSalt           string         `json:"cache_salt,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (q *requester) body(req request) ([]byte, error) {
	if q.native {
		return q.nativeBody(req)
	}
	p := payload{
		Model:       q.model,
		MaxTokens:   req.maxTokens,
		Temperature: q.temperature,
		Stream:      q.stream,
		IgnoreEOS:   q.ignoreEOS,
		CacheSalt:   q.cacheSalt,
	}
	if req.salt != "" {
		p.CacheSalt = req.salt
	}
	if q.stream {
		p.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.model != "" {
		p.Model = req.model
	}
	if q.chat && req.messages != nil {
		p.Messages = req.messages
		p.MaxCompletionTokens = req.maxTokens
	} else if q.chat {
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
	body := req.body
	if body == nil {
		var err error
		if body, err = q.body(req); err != nil {
			rec.err = fmt.Sprintf("encode request: %v", err)
			return
		}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if q.deadline > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, q.deadline, errDeadline)
		defer stop()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, q.url, bytes.NewReader(body))
	if err != nil {
		rec.err = fmt.Sprintf("build request: %v", err)
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	if q.stream && !q.native {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	hreq.Header.Set("X-Request-Id", req.id)
	// A nil Idempotency-Key is not sent, but lets the transport retry the
	// request once on another connection when a kept-alive one turns out
	// to have been closed by the server before it answered (a bare EOF):
	// a starved client reuses idle connections the server already dropped.
	hreq.Header["Idempotency-Key"] = nil
	if q.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+q.apiKey)
	}

	// The send lag is measured where the request leaves for the socket: a
	// starved client can be late between taking its start time and
	// writing, and the server sees only the write.
	var st time.Time
	var sent atomic.Int64 // ns after st, +1 so that 0 is "never"
	hreq = hreq.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { sent.Store(int64(time.Since(st)) + 1) },
	}))
	st = time.Now()
	rec.start = st
	defer func() {
		if d := sent.Load(); d != 0 {
			rec.sent = st.Add(time.Duration(d - 1))
		}
	}()
	wd := startWatchdog(st, q.idle, cancel)
	defer wd.stop()
	resp, err := q.client.Do(hreq)
	if err != nil {
		rec.err, rec.connErr = q.transportError(ctx, err, false)
		if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			rec.err = errClosedBeforeAnswer
		}
		return
	}
	defer resp.Body.Close()
	wd.touch(time.Now())

	if resp.StatusCode != http.StatusOK {
		rec.status = resp.StatusCode
		rec.err = statusError(resp)
		return
	}
	if !q.stream && !q.native {
		q.readWhole(ctx, resp.Body, rec, st)
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
	// A native answer, streamed or not, is lines of JSON; unstreamed it
	// is one line, done, with the whole text: one token event.
	read := readStream
	if q.native {
		read = readNative
	}
	done, rerr := read(br, rec, st, wd, q.captureText, q.maxLine)
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
	if !done && !rec.finished {
		// The body ended cleanly but the server never said the answer
		// was over: a proxy or a crashed worker cut it. Its token count
		// and latency are of a shorter answer than was asked for, so it
		// is a failure, never a completed request.
		rec.err = fmt.Sprintf("stream ended early after %d tokens (no finish_reason, no [DONE])", rec.chunks)
		rec.kind = errStreamCut
		return
	}
	if rec.chunks == 0 {
		rec.err = "stream ended without a token; no TTFT"
		return
	}
	rec.ok = true
}

// readStream consumes SSE lines into rec until [DONE] (done), the end of
// the body, a read error (rerr) or a fault in the stream (rec.err). It is
// the per-token hot path: no allocation beyond rec.itl's growth, one clock
// read and one atomic store per line.
func readStream(br *bufio.Reader, rec *record, st time.Time, wd *watchdog, capture bool, maxLine int) (done bool, rerr error) {
	var (
		c        chunk
		tpl      template
		now      time.Time
		last     time.Time
		scratch  []byte
		buffered int
	)
	for {
		// A line that was already in the buffer arrived with the bytes
		// read before it: it keeps their instant, and the clock is read
		// once per read from the network, not once per line.
		buffered = br.Buffered()
		line, err := readLine(br, &scratch, maxLine)
		if errors.Is(err, errLineTooLong) {
			rec.err = fmt.Sprintf("SSE line longer than %d bytes: request abandoned (raise --max-line-bytes if the server's chunks are that large)", maxLine)
			return false, nil
		}
		if len(line) > 0 {
			if len(line) >= buffered || now.IsZero() {
				now = time.Now()
				if wd != nil {
					wd.touch(now)
				}
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
				if !tpl.match(data, &c) {
					if err := parseChunk(data, &c); err != nil {
						rec.err = malformed(err)
						return false, nil
					}
					tpl.learn(data, &c)
				}
				if c.errMsg != "" {
					rec.err = errInStream + c.errMsg
					return false, nil
				}
				if c.token {
					if rec.chunks == 0 {
						rec.ttft = now.Sub(st).Seconds()
					} else {
						rec.itl = append(rec.itl, now.Sub(last).Seconds())
					}
					rec.chunks++
					last = now
					// vLLM's latency ends at the last token, not at [DONE].
					rec.latency = now.Sub(st).Seconds()
					if capture && c.text != nil {
						rec.text = append(rec.text, c.text...)
					}
				}
				if c.finished {
					rec.finished = true
				}
				if c.hasUsage {
					rec.usage = true
					rec.usageOut = c.completionTokens
					rec.usagePrompt = c.promptTokens
				}
			case bytes.HasPrefix(line, eventPrefix), bytes.HasPrefix(line, idPrefix), bytes.HasPrefix(line, retryPrefix):
			default:
				rec.err = malformed(errors.New("not an SSE field"))
				return false, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// wholeAnswer is a non-streamed completion, either endpoint.
type wholeAnswer struct {
	Choices []struct {
		Text    *string `json:"text"`
		Message *struct {
			Content          *string           `json:"content"`
			ReasoningContent *string           `json:"reasoning_content"`
			Reasoning        *string           `json:"reasoning"`
			ToolCalls        []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// readWhole reads a non-streamed answer (--no-stream). Its first token is
// its last: TTFT equals the end-to-end latency and there are no ITLs.
func (q *requester) readWhole(ctx context.Context, body io.Reader, rec *record, st time.Time) {
	data, err := io.ReadAll(io.LimitReader(body, int64(q.maxLine)+1))
	if err != nil {
		rec.err, _ = q.transportError(ctx, err, true)
		return
	}
	if len(data) > q.maxLine {
		rec.err = fmt.Sprintf("response longer than %d bytes: request abandoned (raise --max-line-bytes)", q.maxLine)
		return
	}
	now := time.Now()
	var a wholeAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		rec.err = "malformed response: " + jsonFault(err)
		return
	}
	if msg := errorMessage(data); msg != "" && len(a.Choices) == 0 {
		rec.err = "server error: " + msg
		return
	}
	if a.Usage != nil {
		rec.usage = true
		rec.usageOut = a.Usage.CompletionTokens
		rec.usagePrompt = a.Usage.PromptTokens
	}
	var text string
	var tools bool
	if len(a.Choices) > 0 {
		ch := a.Choices[0]
		switch {
		case ch.Text != nil:
			text = *ch.Text
		case ch.Message != nil:
			m := ch.Message
			for _, s := range []*string{m.Content, m.ReasoningContent, m.Reasoning} {
				if s != nil {
					text += *s
				}
			}
			tools = len(m.ToolCalls) > 0
		}
	}
	if text == "" && !tools && !(rec.usage && rec.usageOut > 0) {
		rec.err = "answer has no generated output"
		return
	}
	if q.captureText {
		// Kept escaped, as the streaming path keeps it.
		enc, err := json.Marshal(text)
		if err == nil {
			rec.text = enc[1 : len(enc)-1]
		}
	}
	rec.chunks = 1
	rec.ttft = now.Sub(st).Seconds()
	rec.latency = rec.ttft
	rec.ok = true
}

// jsonFault names what is wrong with a JSON body without quoting it.
func jsonFault(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "invalid JSON"
	}
	return "unexpected JSON shape"
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

// errLineTooLong is readLine's answer to a line over its limit.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its line ending. The slice is
// only valid until the next call. A line longer than the reader's buffer is
// gathered in *scratch, up to max bytes (0: no limit); past that it
// returns errLineTooLong, so a server that never sends a newline cannot
// make the client buffer without bound.
func readLine(br *bufio.Reader, scratch *[]byte, max int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		buf := append((*scratch)[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if max > 0 && len(buf) > max {
				*scratch = nil
				return nil, errLineTooLong
			}
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
	if max > 0 && n > max {
		*scratch = nil
		return nil, errLineTooLong
	}
	return line[:n], err
}

// ephemeral matches the "local->" half of a socket pair in Go's network
// errors ("read tcp 127.0.0.1:53412->127.0.0.1:8000: …"): the client's port
// differs per connection, and would make each failure its own error row.
var ephemeral = regexp.MustCompile(`(\[[0-9A-Fa-f:.%]+\]|[0-9A-Za-z.\-]+):[0-9]+->`)

// cleanError words a network error without the client's ephemeral port,
// so identical failures group into one row.
func cleanError(err error) string {
	return ephemeral.ReplaceAllString(err.Error(), "")
}

// transportError words a failed send or read. conn reports a failure to
// connect at all, which the first request uses to tell "target never
// answered".
func (q *requester) transportError(ctx context.Context, err error, streaming bool) (msg string, conn bool) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errIdle):
		if streaming {
			return fmt.Sprintf("stream stalled: no data for %s", q.idle), false
		}
		return fmt.Sprintf("no response within %s", q.idle), false
	case errors.Is(cause, errDeadline):
		return fmt.Sprintf("request deadline: not finished within %s (--request-timeout)", q.deadline), false
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
		return "read stream: " + cleanError(err), false
	}
	return cleanError(err), conn
}

// errClosedBeforeAnswer explains a bare EOF before any response. It is
// never a kept-alive connection the server had dropped: the transport
// retries those on a new connection (see Idempotency-Key above).
const errClosedBeforeAnswer = "connection closed by the server before any answer (EOF) on a new connection: the server may have crashed or be restarting, or a proxy in between dropped the request"

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
