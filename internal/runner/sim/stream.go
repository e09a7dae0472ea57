package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// vocabSpaced holds the generated words with their trailing space (output
// token i is vocabSpaced[i%len]), so tokenize.Count of the output equals the
// token count and the per-token path only copies bytes. Plain ASCII: no JSON
// escaping needed.
var vocabSpaced = func() []string {
	out := make([]string, len(tokenize.Output))
	for i, w := range tokenize.Output {
		out[i] = w + " "
	}
	return out
}()

// chunkTail is how a request ends: finish_reason, stop_reason (as JSON) and,
// after a stop string, the last token's text up to it.
type chunkTail struct {
	finish     string
	stopReason []byte
	text       string
	textSet    bool
}

// chunker encodes one request's SSE chunks in the shape vLLM streams them.
// Everything but the token text is encoded once per request and the chunk
// buffer is reused, so a token costs one copy and one Write.
type chunker struct {
	chat      bool
	head      []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	buf       []byte
	id        string
	created   int64
	mod       []byte
	n         int // tokens in the response
	tail      chunkTail
	reasoning int    // leading tokens sent as reasoning deltas (chat)
	field     string // reasoning delta key
}

func newChunker(chat bool, requestID string, created int64, modelJSON []byte, n int, tail chunkTail, reasoning int, field string) *chunker {
	id, object := "cmpl-"+requestID, "text_completion"
	if chat {
		id, object = "chatcmpl-"+requestID, "chat.completion.chunk"
	}
	head := make([]byte, 0, 128)
	head = append(head, `data: {"id":`...)
	head = append(head, jsonString(id)...)
	head = append(head, `,"object":"`...)
	head = append(head, object...)
	head = append(head, `","created":`...)
	head = strconv.AppendInt(head, created, 10)
	head = append(head, `,"model":`...)
	head = append(head, modelJSON...)
	head = append(head, `,"choices":[`...)
	return &chunker{chat: chat, head: head, buf: make([]byte, 0, 256), id: id, created: created, mod: modelJSON,
		n: n, tail: tail, reasoning: reasoning, field: field}
}

// text is the text of output token i, cut at the stop string for the last.
func (c *chunker) text(i int) string {
	if i == c.n-1 && c.tail.textSet {
		return c.tail.text
	}
	return vocabSpaced[i%len(vocabSpaced)]
}

// role returns the chat stream's first chunk: the assistant role and empty
// content, which vLLM sends before the first token.
func (c *chunker) role() []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	c.buf = b
	return b
}

// token returns the chunk for output token i. The last carries
// finish_reason and stop_reason; chat chunks carry stop_reason only there,
// completion chunks always, as vLLM sends them.
func (c *chunker) token(i int) []byte {
	last := i == c.n-1
	b := append(c.buf[:0], c.head...)
	if c.chat {
		b = append(b, `{"index":0,"delta":{"`...)
		if i < c.reasoning {
			b = append(b, c.field...)
		} else {
			b = append(b, `content`...)
		}
		b = append(b, `":"`...)
		b = append(b, c.text(i)...)
		b = append(b, `"},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `{"index":0,"text":"`...)
		b = append(b, c.text(i)...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
	}
	switch {
	case last:
		b = append(b, '"')
		b = append(b, c.tail.finish...)
		b = append(b, `","stop_reason":`...)
		b = append(b, c.tail.stopReason...)
	case c.chat:
		b = append(b, `null`...)
	default:
		b = append(b, `null,"stop_reason":null`...)
	}
	b = append(b, "}]}\n\n"...)
	c.buf = b
	return b
}

// usage returns the final usage chunk stream_options.include_usage asks for.
func (c *chunker) usage(prompt, completion int) []byte {
	b := append(c.buf[:0], c.head...)
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, "}}\n\n"...)
	c.buf = b
	return b
}

var sseDone = []byte("data: [DONE]\n\n")

// stream writes tokens as the scheduler produces them. When the handler is
// behind (a zero-latency engine) it writes every available chunk and flushes
// once, so each chunk still holds one token but a slow client does not cost
// a syscall per token; with real step times each flush carries one token.
func (e *Engine) stream(ctx context.Context, w http.ResponseWriter, s *seq, c *chunker, rec *TraceRecord, includeUsage bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()

	written := 0
	for written < s.maxTokens {
		n, err := e.await(ctx, s, written)
		if err != nil {
			if errors.Is(err, errClosed) {
				writeStreamError(w, err.Error())
				flush()
			}
			return err
		}
		for ; written < n; written++ {
			if written == 0 && c.chat {
				if _, err := w.Write(c.role()); err != nil {
					s.cancelled.Store(true)
					return errDisconnected
				}
			}
			if _, err := w.Write(c.token(written)); err != nil {
				s.cancelled.Store(true)
				return errDisconnected
			}
			if written == 0 {
				flush()
				rec.FirstTokenUnixNS = time.Now().UnixNano()
			}
		}
		flush()
		rec.OutputTokens = written
		rec.LastTokenUnixNS = time.Now().UnixNano()
	}
	if includeUsage {
		_, _ = w.Write(c.usage(s.promptTokens, written))
	}
	if _, err := w.Write(sseDone); err != nil {
		return errDisconnected
	}
	flush()
	return nil
}

// writeStreamError sends vLLM's in-stream error event.
func writeStreamError(w http.ResponseWriter, msg string) {
	b := append([]byte("data: "), errorBody(http.StatusServiceUnavailable, msg)...)
	_, _ = w.Write(append(b, "\n\n"...))
}

// complete waits for all tokens and answers one JSON object. First and last
// token times are both the moment the body is written: that is when a
// non-streaming client sees any token.
func (e *Engine) complete(ctx context.Context, w http.ResponseWriter, s *seq, c *chunker, rec *TraceRecord) error {
	have := 0
	for have < s.maxTokens {
		n, err := e.await(ctx, s, have)
		if err != nil {
			if errors.Is(err, errClosed) {
				writeError(w, http.StatusServiceUnavailable, err.Error())
			}
			return err
		}
		have = n
	}
	var text, reasoning strings.Builder
	for i := range have {
		if c.chat && i < c.reasoning {
			reasoning.WriteString(c.text(i))
			continue
		}
		text.WriteString(c.text(i))
	}
	usage := map[string]int{"prompt_tokens": s.promptTokens, "total_tokens": s.promptTokens + have, "completion_tokens": have}
	var choice map[string]any
	object := "text_completion"
	stopReason := json.RawMessage(c.tail.stopReason)
	if c.chat {
		object = "chat.completion"
		msg := map[string]any{"role": "assistant", "content": text.String(), "tool_calls": []any{}, c.field: nil}
		if c.reasoning > 0 {
			msg[c.field] = reasoning.String()
			if have <= c.reasoning {
				msg["content"] = nil
			}
		}
		choice = map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": c.tail.finish, "stop_reason": stopReason}
	} else {
		choice = map[string]any{"index": 0, "text": text.String(), "logprobs": nil, "finish_reason": c.tail.finish, "stop_reason": stopReason}
	}
	writeJSON(w, map[string]any{
		"id": c.id, "object": object, "created": c.created, "model": json.RawMessage(c.mod),
		"choices": []any{choice}, "usage": usage,
	})
	now := time.Now().UnixNano()
	rec.FirstTokenUnixNS, rec.LastTokenUnixNS, rec.OutputTokens = now, now, have
	return nil
}

// jsonString encodes s as a JSON string literal.
func jsonString(s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic("sim: marshal a string: " + err.Error()) // unreachable: every Go string encodes
	}
	return b
}
