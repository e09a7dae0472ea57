package sim

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// tokenizeRequest is vLLM's TokenizeCompletionRequest or TokenizeChatRequest:
// a prompt string, or chat messages.
type tokenizeRequest struct {
	Model           string          `json:"model"`
	Prompt          json.RawMessage `json:"prompt"`
	Messages        []chatMessage   `json:"messages"`
	ReturnTokenStrs bool            `json:"return_token_strs"`
}

// tokenizeResponse is vLLM's TokenizeResponse.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// serveTokenize answers POST /tokenize with the ids the engine would see for
// the same prompt or messages, so a client can build prompts of an exact
// length in the model's tokens.
func (e *Engine) serveTokenize(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req tokenizeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if perr := e.checkModel(req.Model); perr != nil {
		writeError(w, perr.status, perr.msg)
		return
	}
	hasPrompt := len(bytes.TrimSpace(req.Prompt)) > 0 && string(bytes.TrimSpace(req.Prompt)) != "null"
	var ids []int32
	switch {
	case hasPrompt && req.Messages != nil:
		writeError(w, http.StatusBadRequest, "send either prompt or messages, not both")
		return
	case hasPrompt:
		var s string
		if err := json.Unmarshal(req.Prompt, &s); err != nil {
			writeError(w, http.StatusBadRequest, "prompt: must be a string")
			return
		}
		ids = tokenize.Encode(make([]int32, 0, 16), s)
	default:
		var perr *apiError
		if ids, perr = encodeMessages(req.Messages); perr != nil {
			if req.Messages == nil {
				perr = badRequest("prompt or messages is required")
			}
			writeError(w, perr.status, perr.msg)
			return
		}
	}
	if ids == nil {
		ids = []int32{}
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: e.cfg.MaxModelLen, Tokens: ids}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			resp.TokenStrs[i] = tokenize.Word(int(id))
		}
	}
	writeJSON(w, resp)
}

// serveDetokenize answers POST /detokenize: the text of token ids, words
// joined by single spaces.
func (e *Engine) serveDetokenize(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if perr := e.checkModel(req.Model); perr != nil {
		writeError(w, perr.status, perr.msg)
		return
	}
	if req.Tokens == nil {
		writeError(w, http.StatusBadRequest, "tokens is required")
		return
	}
	text, err := tokenize.Decode(req.Tokens)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, map[string]string{"prompt": text})
}
