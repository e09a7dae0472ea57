package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
	"github.com/perfgate/perfgate/internal/poll"
)

func TestStreamChunkShapes(t *testing.T) {
	tests := []struct {
		name         string
		path         string
		body         string
		chat         bool
		prompt       int
		includeUsage bool
	}{
		{"chat", "/v1/chat/completions", `{"model":"perfgate-sim","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"say five words now"}],"max_tokens":5,"stream":true}`, true, 6, false},
		{"chat usage", "/v1/chat/completions", `{"model":"perfgate-sim","messages":[{"role":"user","content":[{"type":"text","text":"two parts"},{"type":"image_url"}]}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`, true, 2, true},
		{"completions", "/v1/completions", `{"model":"perfgate-sim","prompt":"one two three","max_tokens":5,"stream":true}`, false, 3, false},
		{"completions usage", "/v1/completions", `{"model":"perfgate-sim","prompt":["one two three four"],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, false, 4, true},
	}
	_, ts := startEngine(t, zeroConfig())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, testCtx(t), ts.URL+tt.path, tt.body, "X-Request-Id", "req-"+strings.ReplaceAll(tt.name, " ", "-"))
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type %q", ct)
			}
			events, done := readSSE(t, resp.Body)
			if !done {
				t.Fatal("stream did not end with [DONE]")
			}
			wantEvents := 5
			if tt.includeUsage {
				wantEvents++
			}
			if tt.chat {
				// vLLM's first chat chunk carries only the role and empty content.
				wantEvents++
				first := decodeMap(t, events[0].data)
				c := first["choices"].([]any)[0].(map[string]any)
				delta := c["delta"].(map[string]any)
				if len(delta) != 2 || delta["role"] != "assistant" || delta["content"] != "" || c["finish_reason"] != nil {
					t.Errorf("first chat chunk %s, want a role-only delta", events[0].data)
				}
				if _, ok := c["stop_reason"]; ok {
					t.Errorf("role chunk carries stop_reason: %s", events[0].data)
				}
				events = events[1:]
				wantEvents--
			}
			if len(events) != wantEvents {
				t.Fatalf("%d events, want %d", len(events), wantEvents)
			}
			wantObject, wantID := "text_completion", "cmpl-req-"
			if tt.chat {
				wantObject, wantID = "chat.completion.chunk", "chatcmpl-req-"
			}
			var text strings.Builder
			for i, ev := range events[:5] {
				m := decodeMap(t, ev.data)
				if m["object"] != wantObject || m["model"] != "perfgate-sim" || !strings.HasPrefix(m["id"].(string), wantID) {
					t.Errorf("chunk %d header: %s", i, ev.data)
				}
				if _, ok := m["usage"]; ok {
					t.Errorf("chunk %d carries usage: %s", i, ev.data)
				}
				choices := m["choices"].([]any)
				if len(choices) != 1 {
					t.Fatalf("chunk %d has %d choices", i, len(choices))
				}
				c := choices[0].(map[string]any)
				fr, present := c["finish_reason"]
				switch {
				case !present:
					t.Errorf("chunk %d has no finish_reason key", i)
				case i < 4 && fr != nil:
					t.Errorf("chunk %d finish_reason %v, want null", i, fr)
				case i == 4 && fr != "length":
					t.Errorf("last chunk finish_reason %v, want length", fr)
				}
				// vLLM sends stop_reason in every completions chunk, and in
				// a chat stream only with the finish_reason.
				sr, hasSR := c["stop_reason"]
				if wantSR := !tt.chat || i == 4; hasSR != wantSR || sr != nil {
					t.Errorf("chunk %d stop_reason present=%v value=%v, want present=%v and null", i, hasSR, sr, wantSR)
				}
				var tok string
				if tt.chat {
					delta := c["delta"].(map[string]any)
					tok, _ = delta["content"].(string)
					if _, hasRole := delta["role"]; hasRole {
						t.Errorf("token chunk %d repeats the role", i)
					}
				} else {
					tok, _ = c["text"].(string)
				}
				if tokenize.Count(tok) != 1 || !strings.HasSuffix(tok, " ") {
					t.Errorf("chunk %d token %q, want one word and a space", i, tok)
				}
				text.WriteString(tok)
			}
			if got := tokenize.Count(text.String()); got != 5 {
				t.Errorf("streamed text %q has %d tokens", text.String(), got)
			}
			if tt.includeUsage {
				m := decodeMap(t, events[5].data)
				if choices := m["choices"].([]any); len(choices) != 0 {
					t.Errorf("usage chunk has choices: %v", choices)
				}
				u := m["usage"].(map[string]any)
				want := map[string]any{"prompt_tokens": float64(tt.prompt), "completion_tokens": 5.0, "total_tokens": float64(tt.prompt + 5)}
				for k, v := range want {
					if u[k] != v {
						t.Errorf("usage %s = %v, want %v", k, u[k], v)
					}
				}
			}
		})
	}
}

func TestNonStreamingAndMaxTokens(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		body       string
		wantPrompt int
		wantOut    int
	}{
		{"chat max_tokens", "/v1/chat/completions", `{"model":"perfgate-sim","messages":[{"role":"user","content":"a b c"}],"max_tokens":7}`, 3, 7},
		{"chat max_completion_tokens wins", "/v1/chat/completions", `{"model":"perfgate-sim","messages":[{"role":"user","content":"a b c"}],"max_tokens":7,"max_completion_tokens":3}`, 3, 3},
		{"chat default", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null},{"role":"user","content":"b c"}]}`, 3, 9},
		{"completions max_tokens", "/v1/completions", `{"model":"perfgate-sim","prompt":"x y","max_tokens":40}`, 2, 40},
		{"completions token ids", "/v1/completions", `{"model":"perfgate-sim","prompt":[1,2,3,4,5,6],"max_tokens":2}`, 6, 2},
		{"completions nested token ids", "/v1/completions", `{"model":"perfgate-sim","prompt":[[1,2,3]],"max_tokens":2}`, 3, 2},
	}
	cfg := zeroConfig()
	cfg.DefaultMaxTokens = 9
	_, ts := startEngine(t, cfg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, testCtx(t), ts.URL+tt.path, tt.body)
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var got struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				Model   string `json:"model"`
				Choices []struct {
					Text    *string `json:"text"`
					Message *struct {
						Role    string `json:"role"`
						Content string `json:"content"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				Usage struct {
					Prompt     int `json:"prompt_tokens"`
					Completion int `json:"completion_tokens"`
					Total      int `json:"total_tokens"`
				} `json:"usage"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if len(got.Choices) != 1 {
				t.Fatalf("%d choices", len(got.Choices))
			}
			c := got.Choices[0]
			var text string
			if strings.Contains(tt.path, "chat") {
				if got.Object != "chat.completion" || c.Message == nil || c.Message.Role != "assistant" {
					t.Fatalf("not a chat.completion: %+v", got)
				}
				text = c.Message.Content
			} else {
				if got.Object != "text_completion" || c.Text == nil {
					t.Fatalf("not a text_completion: %+v", got)
				}
				text = *c.Text
			}
			if n := tokenize.Count(text); n != tt.wantOut {
				t.Errorf("text has %d tokens, want %d", n, tt.wantOut)
			}
			if got.Usage.Prompt != tt.wantPrompt || got.Usage.Completion != tt.wantOut || got.Usage.Total != tt.wantPrompt+tt.wantOut {
				t.Errorf("usage %+v, want prompt %d completion %d", got.Usage, tt.wantPrompt, tt.wantOut)
			}
			if c.FinishReason != "length" || got.Model != "perfgate-sim" || got.ID == "" {
				t.Errorf("finish %q model %q id %q", c.FinishReason, got.Model, got.ID)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		file   string
		status int
	}{
		{"chat_truncated_json.json", 400},
		{"chat_no_messages.json", 400},
		{"chat_empty_messages.json", 400},
		{"chat_no_role.json", 400},
		{"chat_bad_content.json", 400},
		{"chat_zero_max_tokens.json", 400},
		{"chat_n2.json", 400},
		{"chat_stream_options_without_stream.json", 400},
		{"chat_unknown_model.json", 404},
		{"completion_no_prompt.json", 400},
		{"completion_two_prompts.json", 400},
		{"completion_object_prompt.json", 400},
		{"completion_empty_list.json", 400},
		{"completion_unknown_model.json", 404},
		{"completion_not_json.json", 400},
	}
	trace := &syncBuffer{}
	cfg := zeroConfig()
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "bad", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			path := "/v1/completions"
			if strings.HasPrefix(tt.file, "chat_") {
				path = "/v1/chat/completions"
			}
			resp := post(t, testCtx(t), ts.URL+path, string(body))
			defer resp.Body.Close()
			checkAPIError(t, resp, tt.status)
		})
	}
	for _, r := range []struct{ method, path string }{{"GET", "/v1/completions"}, {"DELETE", "/v1/models"}, {"GET", "/v2/nothing"}} {
		req, _ := http.NewRequest(r.method, ts.URL+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusMethodNotAllowed
		if r.path == "/v2/nothing" {
			want = http.StatusNotFound
		}
		checkAPIError(t, resp, want)
		resp.Body.Close()
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	recs := trace.records(t)
	if len(recs) != len(tests) {
		t.Fatalf("%d trace records for %d rejected requests", len(recs), len(tests))
	}
	for _, r := range recs {
		if r.Status < 400 || r.Error == "" || r.OutputTokens != 0 {
			t.Errorf("rejected request traced as %+v", r)
		}
	}
}

func checkAPIError(t *testing.T, resp *http.Response, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body is not JSON: %v", err)
	}
	if body.Error.Message == "" || body.Error.Type == "" || body.Error.Code != status {
		t.Errorf("error body %+v", body.Error)
	}
}

func TestModelsAndHealth(t *testing.T) {
	cfg := zeroConfig()
	cfg.Model = "org/model-7b"
	cfg.StartupDelay = 300 * time.Millisecond
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The startup delay runs on the test's clock, so a slow machine
	// cannot end it before the first probe.
	var elapsed atomic.Int64
	e.now = func() time.Time { return e.start.Add(time.Duration(elapsed.Load())) }
	ts := httptest.NewServer(e.Handler())
	t.Cleanup(func() {
		_ = e.Close()
		ts.Close()
	})

	get := func(path string) *http.Response {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get("/health"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health during startup: %d, want 503", resp.StatusCode)
	}
	resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"model":"org/model-7b","prompt":"hi","max_tokens":1}`)
	checkAPIError(t, resp, http.StatusServiceUnavailable)
	resp.Body.Close()

	elapsed.Store(int64(cfg.StartupDelay - time.Nanosecond))
	if resp := get("/health"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health just before the startup delay ends: %d, want 503", resp.StatusCode)
	}
	elapsed.Store(int64(cfg.StartupDelay))
	if resp := get("/health"); resp.StatusCode != http.StatusOK {
		t.Fatalf("health once the startup delay is over: %d, want 200", resp.StatusCode)
	}

	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(get("/v1/models").Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "org/model-7b" || models.Data[0].Object != "model" {
		t.Errorf("models %+v", models)
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if resp := get("/health"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health after Close: %d, want 503", resp.StatusCode)
	}
}

func TestErrorRateSeeded(t *testing.T) {
	pattern := func(seed int64, n int) []bool {
		cfg := zeroConfig()
		cfg.ErrorRate = 0.3
		cfg.Seed = seed
		_, ts := startEngine(t, cfg)
		out := make([]bool, n)
		for i := range out {
			resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`)
			if resp.StatusCode == http.StatusInternalServerError {
				checkAPIError(t, resp, http.StatusInternalServerError)
				out[i] = true
			} else if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return out
	}
	const n = 200
	a, b, c := pattern(7, n), pattern(7, n), pattern(8, n)
	failed := 0
	for i := range a {
		if a[i] {
			failed++
		}
	}
	if failed < n*15/100 || failed > n*45/100 {
		t.Errorf("%d of %d requests failed at error rate 0.3", failed, n)
	}
	if !slicesEqual(a, b) {
		t.Error("same seed gave a different failure pattern")
	}
	if slicesEqual(a, c) {
		t.Error("different seeds gave the same failure pattern")
	}
}

func slicesEqual(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStall(t *testing.T) {
	const stall = 150 * time.Millisecond
	cfg := zeroConfig()
	cfg.StallMS = int(stall / time.Millisecond)
	_, ts := startEngine(t, cfg)
	sent := time.Now()
	resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":6,"stream":true}`)
	defer resp.Body.Close()
	events, done := readSSE(t, resp.Body)
	if !done || len(events) != 6 {
		t.Fatalf("%d events, done %v", len(events), done)
	}
	// A sleep never ends early, so token 4 (after the stall) reaches the
	// client at least the stall after the request left: a lower bound that
	// holds however loaded the machine is. (The gap between tokens 3 and 4
	// as the client reads them is not one: a client descheduled before
	// reading token 3 shortens it.) Without the stall the engine answers at
	// once.
	if at := events[3].at.Sub(sent); at < stall {
		t.Errorf("token 4 came %v after the request, want >= %v", at, stall)
	}
}

func TestBatchingQueuesBeyondMaxNumSeqs(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = 5 * time.Millisecond
	cfg.MaxNumSeqs = 2
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)
	var mu sync.Mutex
	var seqs []*seq
	e.onFinish = func(s *seq) {
		mu.Lock()
		seqs = append(seqs, s)
		mu.Unlock()
	}

	const maxTokens = 8
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp := post(t, testCtx(t), ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`)
			defer resp.Body.Close()
			if events, done := readSSE(t, resp.Body); !done || len(events) != maxTokens+1 { // the role chunk, then tokens
				t.Errorf("%d events, done %v", len(events), done)
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 4 {
		t.Fatalf("%d sequences finished", len(seqs))
	}
	// Engine steps: never more than two sequences in one step, and the two
	// admitted last start only after one of the first two has finished.
	sort.Slice(seqs, func(i, j int) bool { return seqs[i].firstStep < seqs[j].firstStep })
	for _, s := range seqs {
		if s.lastStep-s.firstStep != maxTokens-1 {
			t.Errorf("sequence ran steps %d..%d for %d tokens", s.firstStep, s.lastStep, maxTokens)
		}
	}
	for step := seqs[0].firstStep; step <= seqs[3].lastStep; step++ {
		n := 0
		for _, s := range seqs {
			if s.firstStep <= step && step <= s.lastStep {
				n++
			}
		}
		if n > 2 {
			t.Fatalf("step %d ran %d sequences with MaxNumSeqs=2", step, n)
		}
	}
	firstDone := min(seqs[0].lastStep, seqs[1].lastStep)
	if seqs[2].firstStep <= firstDone {
		t.Errorf("third sequence started at step %d, before a slot freed at step %d", seqs[2].firstStep, firstDone)
	}

	// Wall clock, as a client sees it: a queued request's first token
	// waits for an admitted sequence's eight steps, each a timer that never
	// fires early, all after the first arrival. A lower bound, so a loaded
	// machine cannot break it; without the queue every first token comes
	// one step after its arrival.
	recs := trace.records(t)
	firstArrival, lastFirstToken := recs[0].ArrivalUnixNS, recs[0].FirstTokenUnixNS
	for _, r := range recs {
		firstArrival, lastFirstToken = min(firstArrival, r.ArrivalUnixNS), max(lastFirstToken, r.FirstTokenUnixNS)
	}
	if wait, want := time.Duration(lastFirstToken-firstArrival), maxTokens*cfg.DecodeStep; wait < want {
		t.Errorf("the last first token came %v after the first arrival, want >= %v (a queued request waits out %d steps)", wait, want, maxTokens)
	}
}

// meanTokenGap runs two concurrent streams and returns the mean time between
// their tokens as the scheduler made them (the instants of the steps that
// produced them, not when a handler got round to writing them).
func meanTokenGap(t *testing.T, slowdown float64) time.Duration {
	cfg := zeroConfig()
	cfg.DecodeStep = 4 * time.Millisecond
	cfg.Slowdown = slowdown
	e, ts := startEngine(t, cfg)
	var mu sync.Mutex
	var seqs []*seq
	e.onFinish = func(s *seq) {
		mu.Lock()
		seqs = append(seqs, s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":12,"stream":true}`)
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 {
		t.Fatalf("%d sequences finished, want 2", len(seqs))
	}
	var sum time.Duration
	for _, s := range seqs {
		sum += s.lastTokenAt.Sub(s.firstTokenAt) / time.Duration(s.gen-1)
	}
	return sum / time.Duration(len(seqs))
}

func TestSlowdownLengthensSteps(t *testing.T) {
	// Step deadlines are timers that never fire early, so the mean gap at
	// slowdown s is at least s steps of 4 ms however loaded the machine
	// is (less the 1 ms the scheduler may catch up over a stream's 11
	// gaps). Without the slowdown the gap is one step: 4 ms, not 12.
	const step, gaps = 4 * time.Millisecond, 11
	for _, s := range []float64{1, 3} {
		want := time.Duration(s*float64(step)) - maxLag/gaps
		if got := meanTokenGap(t, s); got < want {
			t.Errorf("mean token gap %v at slowdown %g, want >= %v", got, s, want)
		}
	}
}

func TestTraceRecords(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = time.Millisecond
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)
	reqs := []struct {
		id, path, body string
		prompt, out    int
	}{
		{"s1", "/v1/chat/completions", `{"messages":[{"role":"user","content":"one two"}],"max_tokens":4,"stream":true}`, 2, 4},
		{"s2", "/v1/completions", `{"prompt":"one two three","max_tokens":1,"stream":true}`, 3, 1},
		{"n1", "/v1/completions", `{"prompt":"a","max_tokens":3}`, 1, 3},
	}
	for _, r := range reqs {
		resp := post(t, testCtx(t), ts.URL+r.path, r.body, "X-Request-Id", r.id)
		if got := resp.Header.Get("X-Request-Id"); got != r.id {
			t.Errorf("X-Request-Id echoed as %q", got)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	recs := trace.records(t)
	if len(recs) != len(reqs) {
		t.Fatalf("%d records, want %d", len(recs), len(reqs))
	}
	byID := map[string]TraceRecord{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	for _, want := range reqs {
		r, ok := byID[want.id]
		if !ok {
			t.Errorf("no record for %s", want.id)
			continue
		}
		if r.Status != 200 || r.Error != "" || r.PromptTokens != want.prompt || r.OutputTokens != want.out {
			t.Errorf("%s: %+v", want.id, r)
		}
		if r.ArrivalUnixNS == 0 || r.FirstTokenUnixNS < r.ArrivalUnixNS || r.LastTokenUnixNS < r.FirstTokenUnixNS {
			t.Errorf("%s: times out of order: %+v", want.id, r)
		}
	}
}

func TestCloseEndsStreams(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = 5 * time.Millisecond
	e, ts := startEngine(t, cfg)
	resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":30000,"stream":true}`)
	defer resp.Body.Close()
	buf := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatalf("first byte: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	events, done := readSSE(t, io.MultiReader(strings.NewReader(string(buf)), resp.Body))
	if done {
		t.Error("stream ended by Close sent [DONE]; clients would count it complete")
	}
	if len(events) == 0 || !strings.Contains(events[len(events)-1].data, `"error"`) {
		t.Errorf("last event is not an error: %v", events[len(events)-1:])
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	after := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi"}`)
	checkAPIError(t, after, http.StatusServiceUnavailable)
	after.Body.Close()
}

func TestDisconnectFreesBatchSlot(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = time.Millisecond
	cfg.MaxNumSeqs = 1
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)

	ctx, cancel := context.WithCancel(testCtx(t))
	resp := post(t, ctx, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":30000,"stream":true}`, "X-Request-Id", "gone")
	if _, err := io.ReadFull(resp.Body, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()

	// With the only slot still held, this request would queue forever.
	next := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	if next.StatusCode != http.StatusOK {
		t.Fatalf("status %d", next.StatusCode)
	}
	next.Body.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range trace.records(t) {
		if r.RequestID == "gone" && r.Status != 499 {
			t.Errorf("disconnected request traced as %+v", r)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"default", func(*Config) {}, ""},
		{"zero latency", func(c *Config) { *c = zeroConfig() }, ""},
		{"empty model", func(c *Config) { c.Model = "" }, "model id is empty"},
		{"negative step", func(c *Config) { c.DecodeStep = -time.Millisecond }, "decode step"},
		{"no batch", func(c *Config) { c.MaxNumSeqs = 0 }, "max num seqs"},
		{"zero slowdown", func(c *Config) { c.Slowdown = 0 }, "slowdown"},
		{"error rate > 1", func(c *Config) { c.ErrorRate = 1.5 }, "error rate"},
		{"negative stall", func(c *Config) { c.StallMS = -1 }, "stall"},
		{"negative crash after", func(c *Config) { c.CrashAfter = -1 }, "crash after"},
		{"negative jitter", func(c *Config) { c.Jitter = -0.1 }, "jitter"},
		{"no default max tokens", func(c *Config) { c.DefaultMaxTokens = 0 }, "default max tokens"},
		{"budget below batch", func(c *Config) { c.MaxNumBatchedTokens = c.MaxNumSeqs - 1 }, "max num batched tokens"},
		{"zero eagerness", func(c *Config) { c.PrefillEagerness = 0 }, "prefill eagerness"},
		{"eagerness > 1", func(c *Config) { c.PrefillEagerness = 1.5 }, "prefill eagerness"},
		{"no blocks", func(c *Config) { c.NumGPUBlocks = 0 }, "num gpu blocks"},
		{"too many blocks", func(c *Config) { c.NumGPUBlocks = 1 << 30 }, "num gpu blocks"},
		{"bad block size", func(c *Config) { c.BlockSize = 0 }, "block size"},
		{"model longer than cache", func(c *Config) { c.NumGPUBlocks, c.BlockSize, c.MaxModelLen = 10, 16, 161 }, "larger than the KV cache"},
		{"negative card cv", func(c *Config) { c.Noise.CardCV = -0.1 }, "card cv"},
		{"throttle without length", func(c *Config) { c.Noise.ThrottleFor = 0 }, "throttle for is 0"},
		{"drift too large", func(c *Config) { c.Noise.DriftPerHour = 2 }, "drift per hour"},
		{"bad reasoning field", func(c *Config) { c.ReasoningField = "thinking" }, "reasoning field"},
		{"negative overhead", func(c *Config) { c.PrefillStepOverhead = -1 }, "prefill step overhead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			e, err := New(c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				_ = e.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error %v, want mention of %q", err, tt.want)
			}
		})
	}
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, zeroConfig(), "", func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("Serve never became ready")
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("bound address %q", addr)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("Serve did not return after cancel")
	}
}

// CrashAfter crashes the engine once, when it has answered that many
// completion requests: a crash at a point in the run, not at a time.
func TestCrashAfter(t *testing.T) {
	cfg := zeroConfig()
	cfg.CrashAfter = 3
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var crashes atomic.Int32
	crashed := make(chan struct{})
	e.crash = func() {
		if crashes.Add(1) == 1 {
			close(crashed)
		}
	}
	ts := httptest.NewServer(e.Handler())
	t.Cleanup(func() {
		_ = e.Close()
		ts.Close()
	})
	for i := range 5 {
		if i == 2 && crashes.Load() != 0 {
			t.Fatalf("crashed after %d answers, want after 3", i)
		}
		resp := post(t, testCtx(t), ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i == 2 {
			select {
			case <-crashed:
			case <-testCtx(t).Done():
				t.Fatal("no crash after the third answer")
			}
		}
	}
	if n := crashes.Load(); n != 1 {
		t.Errorf("%d crashes, want 1", n)
	}
}
