package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/perfgate/perfgate/internal/tokenize"
)

// maxBody bounds a request body; long-context benchmarks send a few MiB.
const maxBody = 32 << 20

var errDisconnected = errors.New("client disconnected")

// Handler serves the OpenAI-compatible API: /v1/chat/completions,
// /v1/completions, /v1/models and /health.
func (e *Engine) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { e.serveGenerate(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { e.serveGenerate(w, r, false) })
	mux.HandleFunc("GET /v1/models", e.serveModels)
	mux.HandleFunc("GET /health", e.serveHealth)
	mux.HandleFunc("/", serveFallback)
	return mux
}

// apiError is an OpenAI-style error, in the shape current vLLM answers.
type apiError struct {
	status int
	msg    string
}

func (a *apiError) Error() string { return a.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

var errorTypes = map[int]string{
	http.StatusBadRequest:          "BadRequestError",
	http.StatusNotFound:            "NotFoundError",
	http.StatusMethodNotAllowed:    "MethodNotAllowed",
	http.StatusInternalServerError: "InternalServerError",
	http.StatusServiceUnavailable:  "ServiceUnavailableError",
}

func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": errorTypes[status], "param": nil, "code": status,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

func serveFallback(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/v1/completions", "/v1/models", "/health":
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	}
}

func (e *Engine) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !e.ready() {
		writeError(w, http.StatusServiceUnavailable, "engine is not ready")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *Engine) serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": e.cfg.Model, "object": "model", "created": e.start.Unix(),
		"owned_by": "perfgate", "root": e.cfg.Model, "parent": nil,
	}}})
}

// genRequest is what both endpoints reduce a request body to.
type genRequest struct {
	model        string
	promptTokens int
	maxTokens    int
	stream       bool
	includeUsage bool
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	IgnoreEOS           bool           `json:"ignore_eos"`
	N                   *int           `json:"n"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	IgnoreEOS     bool            `json:"ignore_eos"`
	N             *int            `json:"n"`
}

func (e *Engine) parseChat(body []byte) (genRequest, *apiError) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return genRequest{}, badRequest("invalid JSON body: %v", err)
	}
	if req.Messages == nil {
		return genRequest{}, badRequest("messages is required")
	}
	if len(req.Messages) == 0 {
		return genRequest{}, badRequest("messages must not be empty")
	}
	g := genRequest{model: req.Model, stream: req.Stream}
	for i, m := range req.Messages {
		if m.Role == "" {
			return genRequest{}, badRequest("messages[%d].role is required", i)
		}
		n, err := countContent(m.Content)
		if err != nil {
			return genRequest{}, badRequest("messages[%d].content: %v", i, err)
		}
		g.promptTokens += n
	}
	max := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		max = req.MaxCompletionTokens
	}
	if err := e.finishParse(&g, max, req.N, req.StreamOptions); err != nil {
		return genRequest{}, err
	}
	return g, nil
}

func (e *Engine) parseCompletion(body []byte) (genRequest, *apiError) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return genRequest{}, badRequest("invalid JSON body: %v", err)
	}
	n, err := countPrompt(req.Prompt)
	if err != nil {
		return genRequest{}, badRequest("prompt: %v", err)
	}
	g := genRequest{model: req.Model, stream: req.Stream, promptTokens: n}
	if err := e.finishParse(&g, req.MaxTokens, req.N, req.StreamOptions); err != nil {
		return genRequest{}, err
	}
	return g, nil
}

func (e *Engine) finishParse(g *genRequest, maxTokens, n *int, so *streamOptions) *apiError {
	g.maxTokens = e.cfg.DefaultMaxTokens
	if maxTokens != nil {
		if *maxTokens < 1 {
			return badRequest("max_tokens must be at least 1, got %d", *maxTokens)
		}
		g.maxTokens = *maxTokens
	}
	if n != nil && *n != 1 {
		return badRequest("n=%d is not supported by perfgate sim: send n=1", *n)
	}
	if so != nil {
		if !g.stream {
			return badRequest("stream_options is only allowed when stream is true")
		}
		g.includeUsage = so.IncludeUsage
	}
	if g.model == "" {
		g.model = e.cfg.Model // vLLM serves its one model when none is named
	}
	return nil
}

// countContent counts the tokens of a chat message content: a string, null,
// or a list of parts whose text parts count.
func countContent(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return tokenize.Count(s), nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return 0, errors.New("must be a string or a list of content parts")
	}
	n := 0
	for _, p := range parts {
		if p.Type == "text" {
			n += tokenize.Count(p.Text)
		}
	}
	return n, nil
}

// countPrompt counts a completions prompt: a string, a one-element list of
// strings, or token ids (a list of integers, or one such list).
func countPrompt(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New("is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return tokenize.Count(s), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, errors.New("must be a string, a list of strings or a list of token ids")
	}
	if len(list) == 0 {
		return 0, errors.New("must not be empty")
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return len(ids), nil
	}
	if len(list) != 1 {
		return 0, fmt.Errorf("has %d prompts; perfgate sim takes one prompt per request", len(list))
	}
	return countPrompt(list[0])
}

// serveGenerate runs one completion request through the engine.
func (e *Engine) serveGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = strconv.FormatInt(e.start.UnixNano(), 36) + "-" + strconv.FormatUint(e.ids.Add(1), 10)
	}
	w.Header().Set("X-Request-Id", id)
	rec := TraceRecord{RequestID: id, ArrivalUnixNS: arrival.UnixNano()}
	if !e.enter() {
		writeError(w, http.StatusServiceUnavailable, errClosed.Error())
		return
	}
	defer e.leave()
	fail := func(status int, msg string) {
		rec.Status, rec.Error = status, msg
		writeError(w, status, msg)
		e.trace.write(rec)
	}
	if !e.ready() {
		fail(http.StatusServiceUnavailable, "engine is not ready")
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	var g genRequest
	var perr *apiError
	if chat {
		g, perr = e.parseChat(body)
	} else {
		g, perr = e.parseCompletion(body)
	}
	if perr != nil {
		fail(perr.status, perr.msg)
		return
	}
	rec.PromptTokens = g.promptTokens
	if g.model != e.cfg.Model {
		fail(http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", g.model))
		return
	}
	if e.injectError() {
		fail(http.StatusInternalServerError, "simulated engine error (--error-rate)")
		return
	}
	stallAt := 0
	if e.cfg.StallMS > 0 && g.maxTokens >= 2 {
		stallAt = g.maxTokens / 2
	}
	s := newSeq(g.promptTokens, g.maxTokens, stallAt)
	if err := e.submit(s); err != nil {
		fail(http.StatusServiceUnavailable, err.Error())
		return
	}
	out := newChunker(chat, id, arrival.Unix(), e.modelJSON)
	if g.stream {
		err = e.stream(r.Context(), w, s, out, &rec, g.includeUsage)
	} else {
		err = e.complete(r.Context(), w, s, out, &rec)
	}
	switch {
	case err == nil:
		rec.Status = http.StatusOK
	case errors.Is(err, errDisconnected):
		rec.Status, rec.Error = 499, err.Error()
	default:
		rec.Status, rec.Error = http.StatusServiceUnavailable, err.Error()
	}
	if e.onFinish != nil {
		e.onFinish(s)
	}
	e.trace.write(rec)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= maxBody {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
		return nil, fmt.Errorf("read request body: %v", err)
	}
	return buf.Bytes(), nil
}

// await blocks until the engine has produced more than have tokens for s, the
// client goes away, or the engine closes.
func (e *Engine) await(ctx context.Context, s *seq, have int) (int, error) {
	for {
		if n := int(s.produced.Load()); n > have {
			return n, nil
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			s.cancelled.Store(true)
			return have, errDisconnected
		case <-e.done:
			if n := int(s.produced.Load()); n > have {
				return n, nil
			}
			return have, errClosed
		}
	}
}
