package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// With the server's /tokenize, every prompt is exactly --input-len of the
// model's tokens, though the fake tokenizer makes long words two tokens
// and an unspaced first word one more.
func TestPromptsInModelTokens(t *testing.T) {
	f := &fakeVLLM{tokenize: true, usage: true, maxModelLen: 4096}
	url := f.start(t)
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 12, InputLen: 50, OutputLen: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.prompts) != 13 {
		t.Fatalf("server got %d prompts, want 13 (first request + 12)", len(f.prompts))
	}
	for i, p := range f.prompts {
		if n := fakeCount(p); n != 50 {
			t.Errorf("prompt %d is %d model tokens, want 50: %.60q", i, n, p)
		}
	}
	for i, n := range r.InputLens {
		if n != 50 {
			t.Errorf("input_lens[%d] = %d, want 50", i, n)
		}
	}
	sec := r.Perfgate
	if sec.InputTokenSource != "server_tokenizer" || r.TokenizerID != "server:fake-model" || sec.TokenSource != "usage" || len(sec.Warnings) != 0 {
		t.Errorf("input source %q tokenizer %q token source %q warnings %q", sec.InputTokenSource, r.TokenizerID, sec.TokenSource, sec.Warnings)
	}

	// Without /tokenize prompts are words; the result says so, and the
	// input lengths are the server's usage.prompt_tokens.
	g := &fakeVLLM{usage: true}
	url = g.start(t)
	r, err = Run(context.Background(), Options{Target: url, NumPrompts: 4, InputLen: 50, OutputLen: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Perfgate.InputTokenSource != "whitespace" || len(r.Perfgate.Warnings) != 1 || !strings.Contains(r.Perfgate.Warnings[0], "no /tokenize") {
		t.Errorf("input source %q warnings %q", r.Perfgate.InputTokenSource, r.Perfgate.Warnings)
	}
	// The first request reuses the first measured prompt, so the server's
	// first prompt is request 0's whatever order the others were sent in.
	if r.InputLens[0] != fakeCount(g.prompts[0])+5 {
		t.Errorf("input_lens[0] = %d, want the server's usage.prompt_tokens %d", r.InputLens[0], fakeCount(g.prompts[0])+5)
	}
}

// A server with no usage block that sends 50-character chunks: counting
// chunks would give 8 "tokens" for 100; with /tokenize the generated text
// is counted in model tokens, and the result says where counts came from.
func TestOutputTokensWithoutUsage(t *testing.T) {
	for _, tc := range []struct {
		tokenize   bool
		wantOut    int
		wantSource string
		wantWarn   string
	}{
		{true, 4 * 100, "server_tokenizer", "counted with the server's /tokenize"},
		{false, 4 * 8, "chunks", "counted as stream chunks, an estimate"},
	} {
		f := &fakeVLLM{tokenize: tc.tokenize, chunkChars: 50}
		url := f.start(t)
		r, err := Run(context.Background(), Options{Target: url, NumPrompts: 4, InputLen: 8, OutputLen: 100})
		if err != nil {
			t.Fatal(err)
		}
		sec := r.Perfgate
		if r.TotalOutputTokens != tc.wantOut || sec.TokenSource != tc.wantSource {
			t.Errorf("tokenize %v: %d output tokens from %q, want %d from %q", tc.tokenize, r.TotalOutputTokens, sec.TokenSource, tc.wantOut, tc.wantSource)
		}
		if !strings.Contains(strings.Join(sec.Warnings, "\n"), tc.wantWarn) {
			t.Errorf("tokenize %v: warnings %q lack %q", tc.tokenize, sec.Warnings, tc.wantWarn)
		}
		var buf bytes.Buffer
		WriteSummary(&buf, r)
		if !strings.Contains(buf.String(), "Warnings") || !strings.Contains(buf.String(), tc.wantWarn) {
			t.Errorf("summary does not carry the warning:\n%s", buf.String())
		}
	}
}

// Reasoning models stream reasoning_content before any content. As in
// vLLM's client, the first reasoning delta is the first token, and every
// delta after it is an inter-token gap.
func TestReasoningDeltasTimed(t *testing.T) {
	f := &fakeVLLM{usage: true, reasoning: 3, reasonGap: 100 * time.Millisecond}
	url := f.start(t)
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 2, InputLen: 4, OutputLen: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, ttft := range r.TTFTs {
		// The first reasoning delta leaves at 100 ms, the first content at 300 ms.
		if ttft < 0.1 || ttft > 0.25 {
			t.Errorf("request %d: TTFT %.3f s, want the first reasoning delta's (~0.1 s), not the first content's (~0.3 s)", i, ttft)
		}
		if n := len(r.ITLs[i]); n != 3+5-1 {
			t.Errorf("request %d: %d ITLs, want 7 (3 reasoning + 5 content deltas, less the first)", i, n)
		}
	}
	if r.TotalOutputTokens != 2*(5+3) {
		t.Errorf("output tokens %d, want usage's 16", r.TotalOutputTokens)
	}
}

// A request that cannot fit the model's context is refused before the
// run, naming the limit.
func TestMaxModelLenChecked(t *testing.T) {
	f := &fakeVLLM{tokenize: true, usage: true, maxModelLen: 40}
	url := f.start(t)
	_, err := Run(context.Background(), Options{Target: url, NumPrompts: 3, InputLen: 36, OutputLen: 8})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "does not fit the model's max_model_len 40") {
		t.Fatalf("Run error = %v, want a usage error about max_model_len", err)
	}
}

// --no-stream: one JSON answer per request; the API key goes with it.
func TestRunNoStream(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var b sentBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock() // the requests are handled at once
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if b.Stream || b.StreamOptions.IncludeUsage {
			http.Error(w, "want a non-streaming request", 400)
			return
		}
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"a b c","reasoning_content":null},"finish_reason":"length"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 3, InputLen: 2, OutputLen: 3,
		NoStream: true, APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 3 || r.TotalOutputTokens != 9 || !r.Perfgate.Load.NoStream {
		t.Fatalf("completed %d out %d no_stream %v; errors %v", r.Completed, r.TotalOutputTokens, r.Perfgate.Load.NoStream, r.Errors)
	}
	if r.Metrics["median_ttft_ms"] < 20 || r.Metrics["median_ttft_ms"] != r.Metrics["median_e2el_ms"] {
		t.Errorf("TTFT %v ms, E2EL %v ms: want equal, ≥ 20 ms", r.Metrics["median_ttft_ms"], r.Metrics["median_e2el_ms"])
	}
	if !strings.Contains(strings.Join(r.Perfgate.Warnings, " "), "--no-stream") {
		t.Errorf("warnings %q", r.Perfgate.Warnings)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auth {
		if a != "Bearer sk-test" {
			t.Errorf("Authorization %q", a)
		}
	}
}

// Network errors name the server's address, not the client's port, so
// each failed connection does not make its own error row.
func TestCleanError(t *testing.T) {
	for in, want := range map[string]string{
		"read tcp 127.0.0.1:53412->127.0.0.1:8000: read: connection reset by peer": "read tcp 127.0.0.1:8000: read: connection reset by peer",
		"write tcp [::1]:40000->[::1]:8000: broken pipe":                           "write tcp [::1]:8000: broken pipe",
		"read tcp host-a:61000->engine:8000: i/o timeout":                          "read tcp engine:8000: i/o timeout",
		"unexpected EOF": "unexpected EOF",
	} {
		if got := cleanError(errors.New(in)); got != want {
			t.Errorf("cleanError(%q) = %q, want %q", in, got, want)
		}
	}
}
