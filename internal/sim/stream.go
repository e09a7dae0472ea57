package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// vocab is the text the engine "generates": token i is vocab[i%len(vocab)],
// one word plus a space, so tokenize.Count of the output equals the token
// count. Plain ASCII, so it needs no JSON escaping.
var vocab = strings.Fields(`the quick brown fox jumps over a lazy dog while
	seven bright engines hum along the river and every batch of tokens
	streams out in order to the waiting clients who measure each gap`)

func word(i int) string { return vocab[i%len(vocab)] + " " }

// vocabSpaced holds the words with their trailing space, built once so the
// per-token path only copies bytes.
var vocabSpaced = func() []string {
	out := make([]string, len(vocab))
	for i := range vocab {
		out[i] = word(i)
	}
	return out
}()

// chunker encodes one request's SSE chunks in the shape vLLM streams them.
// Everything but the token text is encoded once per request and the chunk
// buffer is reused, so a token costs one copy and one Write.
type chunker struct {
	chat    bool
	head    []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	buf     []byte
	id      string
	created int64
	mod     []byte
}

func newChunker(chat bool, requestID string, created int64, modelJSON []byte) *chunker {
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
	return &chunker{chat: chat, head: head, buf: make([]byte, 0, 256), id: id, created: created, mod: modelJSON}
}

// token returns the chunk for token i. The first chat chunk carries the
// assistant role and the last carries finish_reason, as vLLM sends them, so
// every chunk holds exactly one token.
func (c *chunker) token(i int, last bool) []byte {
	b := append(c.buf[:0], c.head...)
	if c.chat {
		b = append(b, `{"index":0,"delta":{`...)
		if i == 0 {
			b = append(b, `"role":"assistant",`...)
		}
		b = append(b, `"content":"`...)
		b = append(b, vocabSpaced[i%len(vocabSpaced)]...)
		b = append(b, `"},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `{"index":0,"text":"`...)
		b = append(b, vocabSpaced[i%len(vocabSpaced)]...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
	}
	if last {
		b = append(b, `"length"`...)
	} else {
		b = append(b, `null`...)
	}
	if !c.chat {
		b = append(b, `,"stop_reason":null`...)
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
			if err == errClosed {
				writeStreamError(w, err.Error())
				flush()
			}
			return err
		}
		for ; written < n; written++ {
			if _, err := w.Write(c.token(written, written == s.maxTokens-1)); err != nil {
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
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": errorTypes[http.StatusServiceUnavailable], "param": nil, "code": http.StatusServiceUnavailable,
	}})
	_, _ = w.Write([]byte("data: "))
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n\n"))
}

// complete waits for all tokens and answers one JSON object. First and last
// token times are both the moment the body is written: that is when a
// non-streaming client sees any token.
func (e *Engine) complete(ctx context.Context, w http.ResponseWriter, s *seq, c *chunker, rec *TraceRecord) error {
	have := 0
	for have < s.maxTokens {
		n, err := e.await(ctx, s, have)
		if err != nil {
			if err == errClosed {
				writeError(w, http.StatusServiceUnavailable, err.Error())
			}
			return err
		}
		have = n
	}
	var text strings.Builder
	for i := range have {
		text.WriteString(vocabSpaced[i%len(vocabSpaced)])
	}
	usage := map[string]int{"prompt_tokens": s.promptTokens, "total_tokens": s.promptTokens + have, "completion_tokens": have}
	var choice map[string]any
	object := "text_completion"
	if c.chat {
		object = "chat.completion"
		choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text.String()},
			"logprobs": nil, "finish_reason": "length"}
	} else {
		choice = map[string]any{"index": 0, "text": text.String(), "logprobs": nil, "finish_reason": "length", "stop_reason": nil}
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
	b, _ := json.Marshal(s)
	return b
}
