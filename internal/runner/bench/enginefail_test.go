package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// A request the engine ends itself is recorded by prompt, with the
// engine's words. testdata/ollama-0.9.6-repeat-limit.sse is Ollama v0.9.6's
// answer on /v1/completions to a prompt for which the tiny model repeats
// one token ("L"): its runner stops the prediction after 31 repeats
// without an error, and the stream ends with no finish_reason, no [DONE]
// and no usage (the native API's last line, in the -native.jsonl beside
// it, is "done": false with no counts). An engine may also report an
// error after it has streamed. A request refused outright is not the
// engine ending a stream early.
func TestEngineFailuresByPrompt(t *testing.T) {
	t.Parallel()
	recorded, err := os.ReadFile("testdata/ollama-0.9.6-repeat-limit.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		switch {
		case strings.HasSuffix(id, "-probe"):
			streamTokens(w, false, 2, true, 2)
		case strings.HasSuffix(id, "-2"): // Ollama's repeat limit, as recorded
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(recorded)
		case strings.HasSuffix(id, "-4"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}`+"\n\n")
			io.WriteString(w, `data: {"error":{"message":"model runner has unexpectedly stopped"}}`+"\n\n")
		case strings.HasSuffix(id, "-5"):
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			streamTokens(w, false, 8, true, 2)
		}
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
		NumPrompts: 8, InputLen: 2, OutputLen: 32, MaxErrorRate: 1})
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
