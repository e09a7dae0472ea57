package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// apiError is an OpenAI-style error, in the shape current vLLM answers.
type apiError struct {
	status int
	msg    string
}

func (a *apiError) Error() string { return a.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// genRequest is what both generation endpoints reduce a request body to.
type genRequest struct {
	model        string
	prompt       []int32
	maxTokens    int
	stream       bool
	includeUsage bool
	stop         []string
	stopTokenIDs []int
	// cacheSalt isolates the request's prefix-cache entries from those of
	// requests with another salt, as vLLM's cache_salt does.
	cacheSalt string
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	N                   *int            `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	StopTokenIDs        []int           `json:"stop_token_ids"`
	CacheSalt           string          `json:"cache_salt"`
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
	Stop          json.RawMessage `json:"stop"`
	StopTokenIDs  []int           `json:"stop_token_ids"`
	CacheSalt     string          `json:"cache_salt"`
}

func (e *Engine) parseChat(body []byte) (genRequest, *apiError) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return genRequest{}, badRequest("invalid JSON body: %v", err)
	}
	prompt, perr := encodeMessages(req.Messages)
	if perr != nil {
		return genRequest{}, perr
	}
	g := genRequest{model: req.Model, stream: req.Stream, prompt: prompt, stopTokenIDs: req.StopTokenIDs, cacheSalt: req.CacheSalt}
	max := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		max = req.MaxCompletionTokens
	}
	if err := e.finishParse(&g, max, req.N, req.StreamOptions, req.Stop, true); err != nil {
		return genRequest{}, err
	}
	return g, nil
}

func (e *Engine) parseCompletion(body []byte) (genRequest, *apiError) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return genRequest{}, badRequest("invalid JSON body: %v", err)
	}
	prompt, err := encodePrompt(req.Prompt)
	if err != nil {
		return genRequest{}, badRequest("prompt: %v", err)
	}
	g := genRequest{model: req.Model, stream: req.Stream, prompt: prompt, stopTokenIDs: req.StopTokenIDs, cacheSalt: req.CacheSalt}
	if err := e.finishParse(&g, req.MaxTokens, req.N, req.StreamOptions, req.Stop, false); err != nil {
		return genRequest{}, err
	}
	return g, nil
}

// encodeMessages tokenizes the text of chat messages. The sim has no chat
// template: the prompt is the messages' text, so /tokenize with the same
// messages counts what usage.prompt_tokens reports.
func encodeMessages(msgs []chatMessage) ([]int32, *apiError) {
	if msgs == nil {
		return nil, badRequest("messages is required")
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages must not be empty")
	}
	var ids []int32
	for i, m := range msgs {
		if m.Role == "" {
			return nil, badRequest("messages[%d].role is required", i)
		}
		var err error
		if ids, err = encodeContent(ids, m.Content); err != nil {
			return nil, badRequest("messages[%d].content: %v", i, err)
		}
	}
	return ids, nil
}

func (e *Engine) finishParse(g *genRequest, maxTokens, n *int, so *streamOptions, stop json.RawMessage, chat bool) *apiError {
	if g.model == "" {
		g.model = e.cfg.Model // vLLM serves its one model when none is named
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
	var err error
	if g.stop, err = parseStop(stop); err != nil {
		return badRequest("stop: %v", err)
	}
	if len(g.prompt) == 0 {
		return badRequest("The decoder prompt cannot be empty")
	}
	limit := e.cfg.MaxModelLen
	input := len(g.prompt)
	where := "prompt"
	if chat {
		where = "messages"
	}
	if input >= limit {
		return badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input %s.", limit, input, where)
	}
	g.maxTokens = min(e.cfg.DefaultMaxTokens, limit-input)
	if maxTokens != nil {
		if *maxTokens < 1 {
			return badRequest("max_tokens must be at least 1, got %d", *maxTokens)
		}
		if input+*maxTokens > limit {
			return badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
				limit, input+*maxTokens, input, where, *maxTokens, where)
		}
		g.maxTokens = *maxTokens
	}
	return nil
}

// parseStop accepts vLLM's stop: null, a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a string or a list of strings")
	}
	return list, nil
}

// stopAt finds where generation stops for stop strings and stop token ids:
// the first output token whose text contains a stop string, or whose id is a
// stop id. It returns the number of tokens generated (the stop token
// included, as usage counts it), the stop token's text up to the stop
// string (the stop string itself is not sent, as vLLM's default
// include_stop_str_in_output=false), and stop_reason as JSON. The output
// repeats every len(tokenize.Output) tokens, so a stop that is not in the
// first period never matches. A stop string spanning two tokens is not
// matched (vLLM would match it).
func stopAt(g genRequest) (n int, lastText string, reason []byte, ok bool) {
	if len(g.stop) == 0 && len(g.stopTokenIDs) == 0 {
		return 0, "", nil, false
	}
	period := len(tokenize.Output)
	for i := range min(g.maxTokens, period) {
		id := int(tokenize.OutputID(i))
		for _, s := range g.stopTokenIDs {
			if s == id {
				return i + 1, "", []byte(strconv.Itoa(id)), true
			}
		}
		text := vocabSpaced[i]
		for _, s := range g.stop {
			if s == "" {
				continue
			}
			if at := strings.Index(text, s); at >= 0 {
				return i + 1, text[:at], jsonString(s), true
			}
		}
	}
	return 0, "", nil, false
}

// encodeContent tokenizes a chat message content: a string, null, or a list
// of parts whose text parts count.
func encodeContent(dst []int32, raw json.RawMessage) ([]int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return dst, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return dst, err
		}
		return tokenize.Encode(dst, s), nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return dst, errors.New("must be a string or a list of content parts")
	}
	for _, p := range parts {
		if p.Type == "text" {
			dst = tokenize.Encode(dst, p.Text)
		}
	}
	return dst, nil
}

// encodePrompt tokenizes a completions prompt: a string, a one-element list
// of strings, or token ids (a list of integers, or one such list).
func encodePrompt(raw json.RawMessage) ([]int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return tokenize.Encode(nil, s), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a string, a list of strings or a list of token ids")
	}
	if len(list) == 0 {
		return nil, errors.New("must not be empty")
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return checkIDs(ids)
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("has %d prompts; perfgate sim takes one prompt per request", len(list))
	}
	return encodePrompt(list[0])
}

func checkIDs(ids []int) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= tokenize.VocabSize {
			return nil, fmt.Errorf("token id %d at position %d is out of vocabulary (0..%d)", id, i, tokenize.VocabSize-1)
		}
		out[i] = int32(id)
	}
	return out, nil
}
