package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestTokenizeMatchesUsageAndDetokenizeRoundTrips(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxModelLen = 4096
	_, ts := startEngine(t, cfg)

	// A prompt built from ids: /detokenize gives text whose /tokenize count
	// and completion usage are exactly the ids' length.
	ids := []int{0, 1, 2, 31999, 500, 12345, 7}
	var detok struct {
		Prompt string `json:"prompt"`
	}
	decodeBody(t, post(t, testCtx(t), ts.URL+"/detokenize", fmt.Sprintf(`{"model":"perfgate-sim","tokens":%s}`, mustJSON(t, ids))), &detok)
	var tok struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []int    `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	decodeBody(t, post(t, testCtx(t), ts.URL+"/tokenize", fmt.Sprintf(`{"model":"perfgate-sim","prompt":%q,"return_token_strs":true}`, detok.Prompt)), &tok)
	if tok.Count != len(ids) || fmt.Sprint(tok.Tokens) != fmt.Sprint(ids) || tok.MaxModelLen != 4096 {
		t.Errorf("tokenize(detokenize(%v)) = %+v", ids, tok)
	}
	if len(tok.TokenStrs) != len(ids) || strings.Join(tok.TokenStrs, " ") != detok.Prompt {
		t.Errorf("token_strs %q for %q", tok.TokenStrs, detok.Prompt)
	}
	var usage struct {
		Usage struct {
			Prompt int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(complete(t, ts.URL, fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, detok.Prompt))), &usage); err != nil {
		t.Fatal(err)
	}
	if usage.Usage.Prompt != len(ids) {
		t.Errorf("usage.prompt_tokens %d for %d ids", usage.Usage.Prompt, len(ids))
	}

	// Chat messages count what the chat endpoint's usage counts.
	msgs := `[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"say five words"}]}]`
	decodeBody(t, post(t, testCtx(t), ts.URL+"/tokenize", `{"messages":`+msgs+`}`), &tok)
	if tok.Count != 5 || tok.TokenStrs != nil {
		t.Errorf("chat tokenize %+v, want 5 tokens and no token_strs", tok)
	}
	resp := post(t, testCtx(t), ts.URL+"/v1/chat/completions", `{"max_tokens":1,"messages":`+msgs+`}`)
	decodeBody(t, resp, &usage)
	if usage.Usage.Prompt != tok.Count {
		t.Errorf("chat usage.prompt_tokens %d, /tokenize count %d", usage.Usage.Prompt, tok.Count)
	}

	// The sim's own output tokenizes to the output ids.
	decodeBody(t, post(t, testCtx(t), ts.URL+"/tokenize", `{"prompt":"the quick brown fox "}`), &tok)
	for i, id := range tok.Tokens {
		if int32(id) != tokenize.OutputID(i) {
			t.Errorf("output word %d has id %d, want %d", i, id, tokenize.OutputID(i))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTokenizeErrors(t *testing.T) {
	_, ts := startEngine(t, zeroConfig())
	for _, tt := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/tokenize", `{"model":"other","prompt":"a"}`, 404, "does not exist"},
		{"/tokenize", `{}`, 400, "prompt or messages is required"},
		{"/tokenize", `{"prompt":"a","messages":[{"role":"user","content":"b"}]}`, 400, "not both"},
		{"/tokenize", `{"prompt":[1,2]}`, 400, "must be a string"},
		{"/tokenize", `{"prompt":`, 400, "invalid JSON"},
		{"/detokenize", `{"tokens":[1,32000]}`, 400, "out of vocabulary"},
		{"/detokenize", `{"model":"other","tokens":[1]}`, 404, "does not exist"},
		{"/detokenize", `{}`, 400, "tokens is required"},
		{"/v1/completions", `{"prompt":[1,-5],"max_tokens":1}`, 400, "out of vocabulary"},
		{"/v1/completions", `{"prompt":"","max_tokens":1}`, 400, "cannot be empty"},
	} {
		resp := post(t, testCtx(t), ts.URL+tt.path, tt.body)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s %s: %d %s, want %d and %q", tt.path, tt.body, resp.StatusCode, b, tt.status, tt.want)
		}
	}
	// GET on a POST route is 405, as for the generation endpoints.
	resp, err := http.Get(ts.URL + "/tokenize")
	if err != nil {
		t.Fatal(err)
	}
	checkAPIError(t, resp, http.StatusMethodNotAllowed)
	resp.Body.Close()
}

func TestMaxModelLen(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxModelLen = 100
	cfg.DefaultMaxTokens = 64
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)

	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			Permission  []struct {
				Object string `json:"object"`
			} `json:"permission"`
		} `json:"data"`
	}
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	decodeBody(t, resp, &models)
	if len(models.Data) != 1 || models.Data[0].MaxModelLen != 100 || len(models.Data[0].Permission) != 1 || models.Data[0].Permission[0].Object != "model_permission" {
		t.Errorf("models %+v", models)
	}

	for _, tt := range []struct {
		path, body string
		want       string
	}{
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":30}`, words(80, 0)), "maximum context length is 100 tokens. However, you requested 110 tokens (80 in the prompt, 30 in the completion)"},
		{"/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":30}`, words(80, 0)), "(80 in the messages, 30 in the completion)"},
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q}`, words(100, 0)), "your request has 100 input tokens"},
	} {
		resp := post(t, testCtx(t), ts.URL+tt.path, tt.body)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 400 || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want 400 and %q", tt.path, resp.StatusCode, b, tt.want)
		}
	}
	// Without max_tokens the default is cut to the room the prompt leaves.
	complete(t, ts.URL, fmt.Sprintf(`{"prompt":%q}`, words(80, 0)), "X-Request-Id", "room")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range trace.records(t) {
		if r.RequestID == "room" && r.OutputTokens != 20 {
			t.Errorf("default max tokens with 20 tokens of room: %d", r.OutputTokens)
		}
	}
}

func TestStopStringsAndStopTokenIDs(t *testing.T) {
	_, ts := startEngine(t, zeroConfig())
	// Output is "the quick brown fox jumps …"; "fox" is token 3 (0-based).
	tests := []struct {
		name, path, body string
		wantText         string
		wantFinish       string
		wantReason       any
		wantTokens       int
	}{
		{"string", "/v1/completions", `{"prompt":"hi","max_tokens":10,"stop":"fox"}`, "the quick brown ", "stop", "fox", 4},
		{"inside a word", "/v1/completions", `{"prompt":"hi","max_tokens":10,"stop":["zzz","own"]}`, "the quick br", "stop", "own", 3},
		{"token id", "/v1/completions", fmt.Sprintf(`{"prompt":"hi","max_tokens":10,"stop_token_ids":[%d]}`, tokenize.OutputID(2)), "the quick ", "stop", float64(tokenize.OutputID(2)), 3},
		{"not reached", "/v1/completions", `{"prompt":"hi","max_tokens":3,"stop":"fox"}`, "the quick brown ", "length", nil, 3},
		{"never generated", "/v1/completions", `{"prompt":"hi","max_tokens":5,"stop":"zebra"}`, "the quick brown fox jumps ", "length", nil, 5},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stop":"fox"}`, "the quick brown ", "stop", "fox", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				Choices []struct {
					Text    string `json:"text"`
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
					StopReason   any    `json:"stop_reason"`
				} `json:"choices"`
				Usage struct {
					Completion int `json:"completion_tokens"`
				} `json:"usage"`
			}
			decodeBody(t, post(t, testCtx(t), ts.URL+tt.path, tt.body), &got)
			c := got.Choices[0]
			text := c.Text + c.Message.Content
			if text != tt.wantText || c.FinishReason != tt.wantFinish || c.StopReason != tt.wantReason || got.Usage.Completion != tt.wantTokens {
				t.Errorf("text %q finish %q stop_reason %v tokens %d; want %q %q %v %d",
					text, c.FinishReason, c.StopReason, got.Usage.Completion, tt.wantText, tt.wantFinish, tt.wantReason, tt.wantTokens)
			}

			// Streaming: the same text, and the last chunk says why.
			stream := strings.Replace(tt.body, `{`, `{"stream":true,`, 1)
			resp := post(t, testCtx(t), ts.URL+tt.path, stream)
			defer resp.Body.Close()
			events, done := readSSE(t, resp.Body)
			if !done {
				t.Fatal("no [DONE]")
			}
			var streamed strings.Builder
			var last map[string]any
			for _, ev := range events {
				m := decodeMap(t, ev.data)
				ch := m["choices"].([]any)[0].(map[string]any)
				if d, ok := ch["delta"].(map[string]any); ok {
					s, _ := d["content"].(string)
					streamed.WriteString(s)
				} else {
					streamed.WriteString(ch["text"].(string))
				}
				last = ch
			}
			if streamed.String() != tt.wantText || last["finish_reason"] != tt.wantFinish || last["stop_reason"] != tt.wantReason {
				t.Errorf("streamed %q, last chunk %v", streamed.String(), last)
			}
		})
	}
}

func TestReasoningDeltasComeFirst(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			cfg := zeroConfig()
			cfg.ReasoningTokens = 3
			cfg.ReasoningField = field
			_, ts := startEngine(t, cfg)
			resp := post(t, testCtx(t), ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
			defer resp.Body.Close()
			events, done := readSSE(t, resp.Body)
			if !done || len(events) != 7 { // role, 5 tokens, usage
				t.Fatalf("%d events, done %v", len(events), done)
			}
			for i, ev := range events[1:6] {
				delta := decodeMap(t, ev.data)["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
				key := "content"
				if i < 3 {
					key = field
				}
				if len(delta) != 1 || delta[key] == nil || delta[key] == "" {
					t.Errorf("token %d delta %v, want only %s", i, delta, key)
				}
			}
			if u := decodeMap(t, events[6].data)["usage"].(map[string]any); u["completion_tokens"] != 5.0 {
				t.Errorf("usage %v: reasoning tokens are completion tokens", u)
			}
			// Completions have no reasoning channel.
			resp2 := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":5}`)
			var c struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			}
			decodeBody(t, resp2, &c)
			if tokenize.Count(c.Choices[0].Text) != 5 {
				t.Errorf("completion text %q", c.Choices[0].Text)
			}
			var chat struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			decodeBody(t, post(t, testCtx(t), ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`), &chat)
			m := chat.Choices[0].Message
			if m[field] != "the quick brown " || m["content"] != "fox jumps " {
				t.Errorf("non-streaming message %v", m)
			}
		})
	}
}

func TestMetricsUseVLLMNames(t *testing.T) {
	cfg := zeroConfig()
	cfg.Model = "org/m"
	_, ts := startEngine(t, cfg)
	for range 3 {
		complete(t, ts.URL, `{"prompt":"one two three","max_tokens":4}`)
	}
	fams := scrape(t, ts.URL)
	for name, want := range map[string]float64{
		"vllm:prompt_tokens_total":     9,
		"vllm:generation_tokens_total": 12,
		"vllm:num_requests_running":    0,
		"vllm:num_requests_waiting":    0,
		"vllm:num_preemptions_total":   0,
		"vllm:gpu_cache_usage_perc":    0,
		"vllm:kv_cache_usage_perc":     0,
	} {
		if got := value(t, fams, name); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
		"vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
		"vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:iteration_tokens_total"} {
		f, ok := fams[name]
		if !ok || f.GetType().String() != "HISTOGRAM" {
			t.Errorf("%s: missing or not a histogram", name)
			continue
		}
		m := f.Metric[0]
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["model_name"] != "org/m" || labels["engine"] != "0" {
			t.Errorf("%s labels %v", name, labels)
		}
		want := uint64(3)
		switch name {
		case "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds":
			want = 9 // three gaps per 4-token request
		case "vllm:iteration_tokens_total":
			want = m.Histogram.GetSampleCount() // one per step
		}
		if m.Histogram.GetSampleCount() != want {
			t.Errorf("%s count %d, want %d", name, m.Histogram.GetSampleCount(), want)
		}
	}
	if ttft := fams["vllm:time_to_first_token_seconds"].Metric[0].Histogram; len(ttft.Bucket) != len(ttftBuckets)+1 || ttft.Bucket[0].GetUpperBound() != 0.001 || ttft.Bucket[21].GetUpperBound() != 2560 {
		t.Errorf("TTFT buckets %v are not vLLM's", ttft.Bucket)
	}
	for _, m := range fams["vllm:request_success_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "finished_reason" && l.GetValue() == "length" && m.Counter.GetValue() != 3 {
				t.Errorf("request_success_total{finished_reason=length} = %g", m.Counter.GetValue())
			}
		}
	}
}

func TestProfileEndpoints(t *testing.T) {
	cfg := zeroConfig()
	cfg.ProfileDir = filepath.Join(t.TempDir(), "profiles")
	_, ts := startEngine(t, cfg)
	resp := post(t, testCtx(t), ts.URL+"/stop_profile", "")
	checkAPIError(t, resp, http.StatusBadRequest)
	resp.Body.Close()

	resp = post(t, testCtx(t), ts.URL+"/start_profile", "")
	resp.Body.Close()
	for range 2 {
		complete(t, ts.URL, `{"prompt":"one two three","max_tokens":4}`)
	}
	resp = post(t, testCtx(t), ts.URL+"/stop_profile", "")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	path := resp.Header.Get("X-Perfgate-Profile-File")
	if resp.StatusCode != 200 || filepath.Dir(path) != cfg.ProfileDir {
		t.Fatalf("stop_profile %d, file %q", resp.StatusCode, path)
	}
	file, err := os.ReadFile(path)
	if err != nil || string(file) != string(body) {
		t.Fatalf("profile file %v: differs from the response", err)
	}
	tr, err := profile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := profile.Summarize(tr)
	// Two requests of 4 tokens, one after the other: each a prefill step
	// (that also gives the first token) and three decode steps.
	if s.PrefillSteps != 2 || s.DecodeSteps != 6 || s.PrefillTokens != 6 || s.DecodeTokens != 6 || tr.Model != "perfgate-sim" {
		t.Errorf("profile summary %+v", s)
	}
	if tr.Config["prefill_eagerness"] != 1.0 {
		t.Errorf("config in trace %v", tr.Config)
	}
}
