package bench

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// The result has every per-request key of vLLM's serve.py, aligned with
// the requests, and survives a round trip through the file.
func TestResultHasVLLMServeKeys(t *testing.T) {
	t.Parallel()
	for _, texts := range []bool{false, true} {
		srv := scripted(t, func(w http.ResponseWriter, r *http.Request) { streamTokens(w, false, 3, true, 2) })
		r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
			NumPrompts: 5, InputLen: 2, OutputLen: 3, MaxConcurrency: 2, SaveTexts: texts})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "r.json")
		if err := r.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		back, err := result.LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var starts, lat, queue []float64
		for k, v := range map[string]*[]float64{"start_times": &starts, "latencies": &lat, "queue_times": &queue} {
			if err := json.Unmarshal(back.Extra[k], v); err != nil || len(*v) != 5 {
				t.Fatalf("texts=%v: %s = %s (%v), want 5 values", texts, k, back.Extra[k], err)
			}
		}
		for i := range 5 {
			if math.Abs(lat[i]*1000-r.Perfgate.E2ELs[i]) > 1e-9 || lat[i] <= 0 || queue[i] < 0 || starts[i] < 1.7e9 {
				t.Errorf("texts=%v: request %d: latency %v (e2el %v ms) queue %v start %v", texts, i, lat[i], r.Perfgate.E2ELs[i], queue[i], starts[i])
			}
		}
		if string(back.Extra["rtfx"]) != "0" || string(back.Extra["label"]) != "null" {
			t.Errorf("rtfx %s label %s, want 0 and null", back.Extra["rtfx"], back.Extra["label"])
		}
		want := ""
		if texts {
			want = "w0 w1 w2 "
		}
		if len(back.GeneratedTexts) != 5 || back.GeneratedTexts[4] != want {
			t.Errorf("texts=%v: generated_texts %q, want 5 × %q", texts, back.GeneratedTexts, want)
		}
	}
}

// A server that drops each kept-alive connection after one answer, without
// saying so, as a server with a short keep-alive timeout does to a client
// that reuses idle connections late: the client retries such a request on
// a new connection instead of failing with a bare EOF.
func TestReusedConnectionClosedIsRetried(t *testing.T) {
	t.Parallel()
	type connKey struct{}
	var mu sync.Mutex
	served := map[net.Conn]int{} // generation requests per connection
	srv := httptest.NewUnstartedServer(nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	mux.HandleFunc("POST "+EndpointCompletions, func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(connKey{}).(net.Conn)
		mu.Lock()
		served[c]++
		n := served[c]
		mu.Unlock()
		if n > 1 {
			_, _ = io.Copy(io.Discard, r.Body)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // no answer: the client reads EOF on a reused connection
			}
			return
		}
		streamTokens(w, false, 2, true, 2)
	})
	srv.Config.Handler = mux
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	srv.Start()
	t.Cleanup(srv.Close)

	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
		NumPrompts: 6, InputLen: 2, OutputLen: 2, MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 6 || r.Failed != 0 {
		t.Errorf("completed %d failed %d, want 6 and 0; errors %v", r.Completed, r.Failed, r.Perfgate.ErrorCounts)
	}
}
