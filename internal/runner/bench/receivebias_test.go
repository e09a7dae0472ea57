package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// slowReader delays the first read of a response body: a client that
// reads its sockets late, as one starved of CPU does, while the server
// sent the first token at once.
type slowReader struct {
	io.ReadCloser
	delay time.Duration
	once  sync.Once
}

func (s *slowReader) Read(p []byte) (int, error) {
	s.once.Do(func() { time.Sleep(s.delay) })
	return s.ReadCloser.Read(p)
}

// lateReads is a transport whose generation answers are read late.
type lateReads struct {
	next  http.RoundTripper
	delay time.Duration
}

func (l lateReads) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil && l.delay > 0 && strings.HasSuffix(r.URL.Path, "/completions") {
		resp.Body = &slowReader{ReadCloser: resp.Body, delay: l.delay}
	}
	return resp, err
}

// The client's self-check uses the server's truth: a client that reads
// its answers late measures TTFTs the engine did not have, and no figure
// of its own (send lag, CPU) shows it. The engine's /metrics TTFT does,
// and the run is flagged client-bound. The client's TTFT is at least the
// server's plus the delay whatever the machine's load, so the flag is
// certain; a client reading on time is not run end to end (on a loaded
// machine its own delays vary), TestTTFTGapRule holds those cases.
func TestReceiveBiasedClientFlagged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		bound bool
	}{
		{"reads 400 ms late", 400 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var ttfts []float64 // the server's own: arrival to first token written
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			})
			mux.HandleFunc("POST "+EndpointCompletions, func(w http.ResponseWriter, r *http.Request) {
				arrived := time.Now()
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a \",\"finish_reason\":null}]}\n\n")
				w.(http.Flusher).Flush()
				mu.Lock()
				ttfts = append(ttfts, time.Since(arrived).Seconds())
				mu.Unlock()
				io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"b \",\"finish_reason\":\"length\"}]}\n\n")
				io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
			})
			mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				var b [5]int
				sum := 0.0
				for _, v := range ttfts {
					for i, le := range []float64{0.01, 0.02, 0.04, 0.08} {
						if v <= le {
							b[i]++
						}
					}
					b[4]++
					sum += v
				}
				io.WriteString(w, vllmMetrics(b, sum, 0, 0, 0))
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 8
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: lateReads{next: tr, delay: tc.delay}}
			r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
				NumPrompts: 8, InputLen: 2, OutputLen: 2, MaxConcurrency: 4, Client: client,
				MaxTTFTGap: 200 * time.Millisecond}) // wide: a loaded CI machine adds delays of its own
			if err != nil {
				t.Fatal(err)
			}
			c, sm := r.Perfgate.Client, r.Perfgate.ServerMetrics
			if sm == nil || sm.TTFTGap == nil || sm.TTFT.Count != 8 {
				t.Fatalf("no cross-check: %+v", sm)
			}
			flagged := c.ClientBound && strings.Contains(c.Reason, "above the server's own")
			if flagged != tc.bound {
				t.Errorf("client-bound on the TTFT gap %v, want %v: gap %+v, check %+v", flagged, tc.bound, *sm.TTFTGap, *c)
			}
		})
	}
}

// The rule alone: the gap is judged against the server's mean TTFT, with
// a floor.
func TestTTFTGapRule(t *testing.T) {
	t.Parallel()
	sm := func(serverMean, gap float64) *result.ServerMetrics {
		return &result.ServerMetrics{Available: true, TTFT: &result.HistogramDelta{Count: 10, MeanMS: serverMean}, TTFTGap: &result.TTFTGap{MeanMS: gap}}
	}
	for _, tc := range []struct {
		name   string
		sm     *result.ServerMetrics
		maxGap time.Duration
		want   string
	}{
		{"no /metrics", nil, 0, ""},
		{"1 ms over 50 ms", sm(50, 1), 0, ""},
		{"36 ms over 300 ms", sm(300, 36), 0, "client TTFT mean 36.0 ms above the server's own (300.0 ms, from its /metrics) > 15.0 ms"},
		{"12 ms over 50 ms: the floor", sm(50, 12), 0, "> 10.0 ms"},
		{"40 ms over 2 s: inside 5%", sm(2000, 40), 0, ""},
		{"own floor", sm(50, 12), 20 * time.Millisecond, ""},
		{"client faster than the server", sm(50, -3), 0, ""},
	} {
		got := ttftGapCheck(tc.sm, tc.maxGap)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// lateWrites is a transport that holds each generation request before
// writing it: a client late between taking its start time and reaching
// the socket.
type lateWrites struct {
	next  http.RoundTripper
	delay time.Duration
}

func (l lateWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/completions") {
		time.Sleep(l.delay)
	}
	return l.next.RoundTrip(r)
}

// The send lag is measured where the request reaches the socket, which
// is when the server can see it: a client held up after taking its start
// time reports the lag the server saw, and is flagged. (Only the late case
// is run end to end: on a loaded machine an on-time client's timers are
// late by their own amount; TestSelfCheckRules holds the healthy cases.)
func TestSendLagAtTheSocket(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) { streamTokens(w, false, 2, true, 2) })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointCompletions, Model: "m",
		NumPrompts: 10, InputLen: 2, OutputLen: 2, RequestRate: 20,
		Client:         &http.Client{Transport: lateWrites{next: tr, delay: delay}},
		MaxScheduleLag: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Perfgate.Client
	if c.ScheduleLagP50MS < float64(delay/time.Millisecond) || !c.ClientBound || !strings.Contains(c.Reason, "schedule lag p99") {
		t.Errorf("lag p50 %.1f ms, bound %v (%s): want at least the %v the writes were held, flagged", c.ScheduleLagP50MS, c.ClientBound, c.Reason, delay)
	}
}
