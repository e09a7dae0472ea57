package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// scripted is a tiny OpenAI-compatible server whose streams the test
// writes: each POST to either endpoint goes to gen, /v1/models lists one
// model.
// It has no /tokenize and no /metrics (both answer 404).
func scripted(t *testing.T, gen http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"scripted-model","object":"model","root":"scripted-model"}]}`)
	})
	mux.HandleFunc("POST "+EndpointChat, gen)
	mux.HandleFunc("POST "+EndpointCompletions, gen)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// streamTokens writes n chat (or completions) token chunks, an optional
// usage chunk and [DONE], flushing each line.
func streamTokens(w http.ResponseWriter, chat bool, n int, usage bool, promptTokens int) {
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	for i := range n {
		if chat {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i)
		} else {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\"w%d \",\"finish_reason\":null}]}\n\n", i)
		}
		f.Flush()
	}
	if usage {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", promptTokens, n, n+promptTokens)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// sentBody is the part of a request body the tests check.
type sentBody struct {
	Model         string  `json:"model"`
	Prompt        string  `json:"prompt"`
	MaxTokens     int     `json:"max_tokens"`
	Temperature   float64 `json:"temperature"`
	Stream        bool    `json:"stream"`
	IgnoreEOS     bool    `json:"ignore_eos"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role, Content string
	} `json:"messages"`
}

func TestRunChatStream(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]bool{}
	var bodies []sentBody
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var b sentBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || r.URL.Path != EndpointChat {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		ids[r.Header.Get("X-Request-Id")] = true
		bodies = append(bodies, b)
		mu.Unlock()
		streamTokens(w, true, b.MaxTokens, true, tokenize.Count(b.Messages[0].Content))
	})
	r, err := Run(context.Background(), Options{
		Target: srv.URL, NumPrompts: 6, InputLen: 12, OutputLen: 5, MaxConcurrency: 2,
		Temperature: 0.5, RunID: "run1", Metadata: map[string]string{"pr": "42"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 6 || r.Failed != 0 || r.TotalOutputTokens != 30 || r.TotalInputTokens != 72 {
		t.Fatalf("completed %d failed %d out %d in %d; errors %v", r.Completed, r.Failed, r.TotalOutputTokens, r.TotalInputTokens, r.Errors)
	}
	for i := range 6 {
		if !ids[fmt.Sprintf("run1-%d", i)] {
			t.Errorf("no request with X-Request-Id run1-%d; got %v", i, ids)
		}
		if len(r.ITLs[i]) != 4 || r.TTFTs[i] <= 0 || r.OutputLens[i] != 5 {
			t.Errorf("request %d: %d itls, ttft %v, output %d", i, len(r.ITLs[i]), r.TTFTs[i], r.OutputLens[i])
		}
	}
	for _, b := range bodies {
		if b.Model != "scripted-model" || !b.Stream || !b.StreamOptions.IncludeUsage || b.MaxTokens != 5 ||
			b.Temperature != 0.5 || !b.IgnoreEOS || len(b.Messages) != 1 || b.Messages[0].Role != "user" ||
			tokenize.Count(b.Messages[0].Content) != 12 {
			t.Errorf("request body %+v", b)
		}
	}
	sec := r.Perfgate
	if sec.TokenSource != "usage" || !strings.HasPrefix(sec.DatasetHash, "sha256:") || sec.SchemaVersion != result.SchemaVersion ||
		sec.Metadata["pr"] != "42" || string(r.Extra["pr"]) != `"42"` {
		t.Errorf("perfgate section %+v extra %v", sec, r.Extra)
	}
	wantLoad := result.Load{Endpoint: EndpointChat, Model: "scripted-model", Dataset: "random", NumPrompts: 6, InputLen: 12,
		OutputLen: 5, RequestRate: result.Inf, Burstiness: 1, MaxConcurrency: 2, Temperature: 0.5}
	if sec.Load != wantLoad {
		t.Errorf("load = %+v\nwant   %+v", sec.Load, wantLoad)
	}
	if r.Backend != "openai-chat" || r.ModelID != "scripted-model" || *r.MaxConcurrency != 2 || len(sec.E2ELs) != 6 {
		t.Errorf("backend %q model %q", r.Backend, r.ModelID)
	}
	// The result survives its own file format.
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := result.Parse(data)
	if err != nil || back.Metrics["p99_ttft_ms"] != r.Metrics["p99_ttft_ms"] || back.Perfgate.DatasetHash != sec.DatasetHash {
		t.Errorf("round trip: %v", err)
	}
}

func TestRunCompletionsWithoutUsage(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var b sentBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		if r.URL.Path != EndpointCompletions || b.Prompt == "" {
			http.Error(w, "wrong endpoint", 404)
			return
		}
		streamTokens(w, false, 3, false, 0) // fewer than asked, no usage
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
		NumPrompts: 4, InputLen: 4, OutputLen: 7})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 4 || r.TotalOutputTokens != 12 || r.Perfgate.TokenSource != "chunks" || r.Backend != "openai" {
		t.Errorf("completed %d out %d from %q backend %q errors %v", r.Completed, r.TotalOutputTokens, r.Perfgate.TokenSource, r.Backend, r.Errors)
	}
}

// faults are the ways a request can fail, each with the error row it
// must give (the same for every request: no ephemeral ports, no bytes).
var faults = []struct {
	name    string
	handler http.HandlerFunc
	want    string
}{
	{"5xx with OpenAI error body", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"engine overloaded","type":"ServiceUnavailableError","code":503}}`)
	}, "HTTP 503: engine overloaded"},
	{"4xx with vLLM error body", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, `{"object":"error","message":"prompt too long","type":"BadRequestError","code":400}`)
	}, "HTTP 400: prompt too long"},
	{"4xx plain text", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such route", 404)
	}, "HTTP 404: no such route"},
	{"4xx string error beside a message", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		io.WriteString(w, `{"message":"Cannot POST /v1/chat/completions","error":"Not Found","statusCode":404}`)
	}, "HTTP 404: Cannot POST /v1/chat/completions"},
	{"malformed data line", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n")
	}, "malformed SSE line: invalid JSON"},
	{"not an SSE line", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>proxy error</html>\n")
	}, "malformed SSE line: not an SSE field"},
	{"error inside the stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"engine closed\",\"code\":503}}\n\n")
	}, "server error in stream: engine closed"},
	{"no token at all", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, ": ping\n\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}, "stream ended without a token; no TTFT"},
	{"stream stalls", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, "stream stalled: no data for 150ms"},
	{"no response headers", func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}, "no response within 150ms"},
	{"tokens trickle past the request deadline", func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}, "request deadline: not finished within 400ms (--request-timeout)"},
	{"SSE line without end", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\""+strings.Repeat("x", 8000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, "SSE line longer than 4096 bytes: request abandoned (raise --max-line-bytes if the server's chunks are that large)"},
	{"connection cut mid-stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}, "read stream: unexpected EOF"},
}

// faultOptions are tight limits, so every fault shows within a second.
func faultOptions(url string) Options {
	return Options{Target: url, Model: "m", NumPrompts: 3, InputLen: 2, OutputLen: 2,
		Timeout: 150 * time.Millisecond, RequestTimeout: 400 * time.Millisecond, MaxLineBytes: 4096}
}

// A fault in the run is one failed request with its reason counted, never
// a crash or a hang; Run succeeds and marks the run as over its error
// budget.
func TestRunFaults(t *testing.T) {
	for _, tt := range faults {
		t.Run(tt.name, func(t *testing.T) {
			srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.Header.Get("X-Request-Id"), "-probe") {
					streamTokens(w, true, 2, true, 2) // the first request goes through
					return
				}
				tt.handler(w, r)
			})
			r, err := Run(context.Background(), faultOptions(srv.URL))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r.Failed != 3 || r.Completed != 0 {
				t.Fatalf("failed %d completed %d, want 3 failed; errors %q", r.Failed, r.Completed, r.Errors)
			}
			if got := r.Perfgate.ErrorCounts[tt.want]; got != 3 {
				t.Errorf("error counts %v, want 3 × %q", r.Perfgate.ErrorCounts, tt.want)
			}
			if r.Perfgate.ErrorRate != 1 || !r.Perfgate.ErrorRateExceeded || r.Perfgate.MaxErrorRate != DefaultMaxErrorRate {
				t.Errorf("error rate %v exceeded %v (max %v)", r.Perfgate.ErrorRate, r.Perfgate.ErrorRateExceeded, r.Perfgate.MaxErrorRate)
			}
		})
	}
}

// The same faults on the first request stop the run before it starts,
// with the server's own words: a run that would measure nothing.
func TestRunFirstRequestFails(t *testing.T) {
	for _, tt := range faults {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int64
			srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				tt.handler(w, r)
			})
			_, err := Run(context.Background(), faultOptions(srv.URL))
			var pe *ProbeError
			if !errors.As(err, &pe) || pe.Msg != tt.want {
				t.Fatalf("Run error = %v, want a first-request failure %q", err, tt.want)
			}
			// A refusal is final; anything else is tried three times.
			want := int64(3)
			if strings.HasPrefix(tt.want, "HTTP 4") {
				want = 1
			}
			if n := sent.Load(); n != want {
				t.Errorf("server got %d requests, want %d", n, want)
			}
		})
	}
}

// A model the server does not serve: vLLM answers 404 with its message;
// the run stops with it and names the models the server does serve.
func TestRunWrongModel(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var b sentBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		if b.Model != "scripted-model" {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"object":"error","message":"The model `+"`%s`"+` does not exist.","type":"NotFoundError","param":"model","code":404}`, b.Model)
			return
		}
		streamTokens(w, true, 2, true, 2)
	})
	_, err := Run(context.Background(), Options{Target: srv.URL, Model: "llama", NumPrompts: 5, InputLen: 2, OutputLen: 2})
	want := "first request failed: HTTP 404: The model `llama` does not exist.; the server serves scripted-model; pass --model scripted-model"
	if err == nil || err.Error() != want {
		t.Fatalf("Run error = %v\nwant %s", err, want)
	}
	// With /v1 in the target the endpoint doubles it; the hint says so.
	_, err = Run(context.Background(), Options{Target: srv.URL + "/v1", Model: "scripted-model", NumPrompts: 5, InputLen: 2, OutputLen: 2})
	if err == nil || !strings.Contains(err.Error(), "drop /v1 from --target") {
		t.Fatalf("Run error = %v, want the /v1 hint", err)
	}
}

// A server that answers every other request with 500 completes half the
// run: the result is written, and says it is over its error budget.
func TestRunErrorBudget(t *testing.T) {
	var n atomic.Int64
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Request-Id"), "-probe") && n.Add(1)%2 == 0 {
			http.Error(w, "busy", 500)
			return
		}
		streamTokens(w, true, 2, true, 2)
	})
	for _, tc := range []struct {
		max      float64
		exceeded bool
	}{{0, true}, {0.5, false}, {0.49, true}} {
		n.Store(0)
		r, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 10, InputLen: 2, OutputLen: 2,
			MaxConcurrency: 1, MaxErrorRate: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if r.Failed != 5 || r.Perfgate.ErrorRateExceeded != tc.exceeded {
			t.Errorf("max %v: failed %d exceeded %v, want 5 and %v", tc.max, r.Failed, r.Perfgate.ErrorRateExceeded, tc.exceeded)
		}
	}
}

func TestRunTargetNeverAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = Run(context.Background(), Options{Target: "http://" + addr, NumPrompts: 5, InputLen: 2, OutputLen: 2})
	if err == nil || !strings.Contains(err.Error(), "never answered") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Run error = %v, want target never answered: … connection refused", err)
	}
}

func TestRunModelLookup(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := Run(context.Background(), Options{Target: srv.URL, NumPrompts: 1})
	if err == nil || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("Run error = %v, want advice to pass --model", err)
	}
}

// The server counts requests in flight; the cap must hold while each
// request lasts long enough that an uncapped client would overlap them all.
func TestRunMaxConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int64
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		streamTokens(w, true, 2, true, 1)
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 12, InputLen: 1, OutputLen: 2, MaxConcurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 12 {
		t.Fatalf("completed %d: %v", r.Completed, r.Errors)
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("server saw %d requests in flight, cap is 3", p)
	}
	if r.MaxConcurrentReqs > 3 {
		t.Errorf("max_concurrent_requests = %v, cap is 3", r.MaxConcurrentReqs)
	}
}

func TestRunWarmupExcluded(t *testing.T) {
	var mu sync.Mutex
	var warmIDs, measuredIDs []string
	prompts := map[string]string{}
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		var b sentBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		id := r.Header.Get("X-Request-Id")
		mu.Lock()
		if strings.HasSuffix(id, "-probe") {
			// the first request, sent alone before the run
		} else if strings.Contains(id, "warmup") {
			warmIDs = append(warmIDs, id)
		} else {
			measuredIDs = append(measuredIDs, id)
		}
		prompts[id] = b.Messages[0].Content
		mu.Unlock()
		streamTokens(w, true, 2, true, 3)
	})
	r, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 5, Warmup: 3, InputLen: 3, OutputLen: 2, RunID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warmIDs) != 3 || len(measuredIDs) != 5 {
		t.Fatalf("server saw %d warmup and %d measured requests, want 3 and 5", len(warmIDs), len(measuredIDs))
	}
	if r.Completed != 5 || len(r.TTFTs) != 5 || r.Perfgate.Warmup != 3 {
		t.Errorf("result has %d completed, %d ttfts, warmup %d; want 5, 5, 3", r.Completed, len(r.TTFTs), r.Perfgate.Warmup)
	}
	for _, wid := range warmIDs {
		for _, mid := range measuredIDs {
			if prompts[wid] == prompts[mid] {
				t.Errorf("warmup %s reuses measured prompt of %s", wid, mid)
			}
		}
	}
	// Warmup must not change what is measured.
	r2, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 5, InputLen: 3, OutputLen: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Perfgate.DatasetHash != r.Perfgate.DatasetHash {
		t.Errorf("dataset hash changed with warmup: %s vs %s", r.Perfgate.DatasetHash, r2.Perfgate.DatasetHash)
	}
}

func TestRunRateLimitedAndCancel(t *testing.T) {
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) { streamTokens(w, true, 2, true, 1) })
	r, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", NumPrompts: 10, InputLen: 1, OutputLen: 2,
		RequestRate: 500, Burstiness: 0.5})
	if err != nil || r.Completed != 10 || r.RequestRate != 500 {
		t.Fatalf("rate-limited run: %v, %+v", err, r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Target: srv.URL, Model: "m", NumPrompts: 1000, InputLen: 1, OutputLen: 2, RequestRate: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled Run error = %v", err)
		}
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("Run did not return after cancel")
	}
}

func TestOptionsUsageErrors(t *testing.T) {
	ok := Options{Target: "http://127.0.0.1:1"}
	tests := []struct {
		flag string
		mod  func(*Options)
	}{
		{"target", func(o *Options) { o.Target = "" }},
		{"target", func(o *Options) { o.Target = "127.0.0.1:8000" }},
		{"endpoint", func(o *Options) { o.Endpoint = "/v1/embeddings" }},
		{"dataset", func(o *Options) { o.Dataset = "hf" }},
		{"dataset-path", func(o *Options) { o.Dataset = "sharegpt" }},
		{"dataset-path", func(o *Options) { o.DatasetPath = "x.json" }},
		{"num-prompts", func(o *Options) { o.NumPrompts = -1 }},
		{"input-len", func(o *Options) { o.InputLen = -1 }},
		{"output-len", func(o *Options) { o.OutputLen = -1 }},
		{"request-rate", func(o *Options) { o.RequestRate = -2 }},
		{"burstiness", func(o *Options) { o.Burstiness = -1 }},
		{"max-concurrency", func(o *Options) { o.MaxConcurrency = -1 }},
		{"warmup", func(o *Options) { o.Warmup = -1 }},
		{"temperature", func(o *Options) { o.Temperature = -0.1 }},
		{"timeout", func(o *Options) { o.Timeout = -time.Second }},
		{"goodput", func(o *Options) { o.Goodput = map[string]float64{"latency": 5} }},
		{"goodput", func(o *Options) { o.Goodput = map[string]float64{"ttft": -5} }},
		{"percentiles", func(o *Options) { o.Percentiles = []float64{0} }},
		{"percentiles", func(o *Options) { o.Percentiles = []float64{101} }},
	}
	for _, tt := range tests {
		o := ok
		tt.mod(&o)
		_, err := Run(context.Background(), o)
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Flag != tt.flag {
			t.Errorf("%+v: error %v, want a usage error for --%s", o, err, tt.flag)
		}
	}
	o := ok
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != EndpointChat || o.Dataset != "random" || o.NumPrompts != 1000 || o.InputLen != 1024 || o.OutputLen != 128 ||
		!o.RequestRate.IsInf() || o.Burstiness != 1 || o.Timeout != DefaultTimeout || len(o.Percentiles) != 4 {
		t.Errorf("defaults: %+v", o)
	}
}

func TestParseGoodput(t *testing.T) {
	got, err := ParseGoodput("ttft:500 tpot:50.5  e2el:2000")
	if err != nil || got["ttft"] != 500 || got["tpot"] != 50.5 || got["e2el"] != 2000 || len(got) != 3 {
		t.Errorf("ParseGoodput = %v, %v", got, err)
	}
	for _, bad := range []string{"ttft", "ttft:x", "itl:5", "ttft=5"} {
		if _, err := ParseGoodput(bad); err == nil {
			t.Errorf("ParseGoodput(%q) accepted", bad)
		}
	}
}
