package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// A request the engine ends itself is recorded by prompt, with the
// engine's words: Ollama's OpenAI layer closes the stream after 31 tokens
// with no finish_reason, no [DONE] and no usage when its runner stops a
// prediction (the shape below is what v0.9.6 sends), and an engine may
// report an error after it has streamed. A request refused outright is
// not the engine ending a stream early.
func TestEngineFailuresByPrompt(t *testing.T) {
	t.Parallel()
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		switch {
		case strings.HasSuffix(id, "-probe"):
			streamTokens(w, true, 2, true, 2)
		case strings.HasSuffix(id, "-2"): // Ollama's repeat limit
			w.Header().Set("Content-Type", "text/event-stream")
			for range 31 {
				io.WriteString(w, `data: {"id":"cmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":" buE"},"finish_reason":null}]}`+"\n\n")
			}
		case strings.HasSuffix(id, "-4"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, `data: {"error":{"message":"model runner has unexpectedly stopped"}}`+"\n\n")
		case strings.HasSuffix(id, "-5"):
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			streamTokens(w, true, 8, true, 2)
		}
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointChat, Model: "m",
		NumPrompts: 8, InputLen: 2, OutputLen: 8, MaxErrorRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Perfgate.EngineFailures
	want := []result.EngineFailure{
		{Prompt: 2, Tokens: 31, Words: engineWords},
		{Prompt: 4, Tokens: 1, Words: "model runner has unexpectedly stopped"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("engine failures %+v, want %+v (errors %q)", got, want, r.Errors)
	}
	var sb strings.Builder
	WriteSummary(&sb, r)
	if !strings.Contains(sb.String(), "prompt #2 after 31 tokens: nothing: the engine closed the stream") {
		t.Errorf("summary lists no engine failure by prompt:\n%s", sb.String())
	}
}
