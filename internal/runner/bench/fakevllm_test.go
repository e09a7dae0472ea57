package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeVLLM is an httptest server shaped like vLLM's OpenAI server where
// the tests need it: /v1/models with max_model_len, /tokenize with a
// tokenizer that is not one word one token, streams with reasoning
// deltas or multi-token chunks, usage on or off, and /metrics.
type fakeVLLM struct {
	model       string
	maxModelLen int
	tokenize    bool // serve /tokenize
	usage       bool // send the usage chunk
	reasoning   int  // reasoning_content deltas before the content
	reasonGap   time.Duration
	chunkChars  int // >0: bundle the output text into chunks of this many characters
	metrics     func() string

	mu        sync.Mutex
	prompts   []string // prompts received, in order
	byID      map[string]string
	arrivals  map[string]time.Time
	tokenized int
	srv       *httptest.Server
}

// fakeCount is the fake tokenizer: a word of more than six letters is two
// tokens, and a text that starts with a word of five or more letters (no
// space before it) costs one token more, as a BPE tokenizer splits an
// unspaced first word.
func fakeCount(text string) int {
	ws := strings.Fields(text)
	n := 0
	for _, w := range ws {
		n++
		if len(w) > 6 {
			n++
		}
	}
	if len(ws) > 0 && !strings.HasPrefix(text, " ") && len(ws[0]) >= 5 {
		n++
	}
	return n
}

func (f *fakeVLLM) start(t *testing.T) string {
	t.Helper()
	if f.model == "" {
		f.model = "fake-model"
	}
	f.arrivals = map[string]time.Time{}
	f.byID = map[string]string{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","max_model_len":%d}]}`, f.model, f.maxModelLen)
	})
	if f.tokenize {
		mux.HandleFunc("POST /tokenize", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Model            string `json:"model"`
				Prompt           string `json:"prompt"`
				AddSpecialTokens *bool  `json:"add_special_tokens"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != f.model || req.AddSpecialTokens == nil || *req.AddSpecialTokens {
				http.Error(w, `{"error":{"message":"bad tokenize request"}}`, 400)
				return
			}
			f.mu.Lock()
			f.tokenized++
			f.mu.Unlock()
			n := fakeCount(req.Prompt)
			toks := make([]int, n)
			data, _ := json.Marshal(map[string]any{"tokens": toks, "count": n, "max_model_len": f.maxModelLen})
			w.Write(data)
		})
	}
	if f.metrics != nil {
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, f.metrics()) })
	}
	mux.HandleFunc("POST "+EndpointChat, f.serveChat)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f.srv.URL
}

func (f *fakeVLLM) serveChat(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var b sentBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, "bad body", 400)
		return
	}
	f.mu.Lock()
	f.prompts = append(f.prompts, b.Messages[0].Content)
	f.arrivals[r.Header.Get("X-Request-Id")] = now
	f.byID[r.Header.Get("X-Request-Id")] = b.Messages[0].Content
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) {
		io.WriteString(w, "data: "+s+"\n\n")
		fl.Flush()
	}
	// vLLM's first chunk carries the role only.
	send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	for i := range f.reasoning {
		time.Sleep(f.reasonGap)
		send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"reasoning_content":"think%d "}}]}`, i))
	}
	text := strings.Repeat("tok ", b.MaxTokens)
	step := 4 // one token per chunk
	if f.chunkChars > 0 {
		step = f.chunkChars
	}
	for i := 0; i < len(text); i += step {
		piece := text[i:min(i+step, len(text))]
		send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, piece))
	}
	send(`{"choices":[{"index":0,"delta":{},"finish_reason":"length","stop_reason":null}]}`)
	if f.usage {
		send(fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, fakeCount(b.Messages[0].Content)+5, b.MaxTokens+f.reasoning))
	}
	io.WriteString(w, "data: [DONE]\n\n")
}
