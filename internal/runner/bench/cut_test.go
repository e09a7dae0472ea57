package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A stream is complete only when the server says so, with a finish_reason
// or [DONE]. One whose body ends without either was cut: it fails with its
// own error kind, counts against the error budget and never adds its
// tokens to the totals.
func TestCutStreamIsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		tail      string // what follows the four content chunks
		completed int
		wantErr   string
	}{
		{"finish_reason and [DONE]", "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 5, ""},
		{"[DONE] only", "data: [DONE]\n\n", 5, ""},
		{"finish_reason only", "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", 5, ""},
		{"neither: cut after 4 of 8", "", 0, "stream ended early after 4 tokens (no finish_reason, no [DONE])"},
		{"a null finish_reason is no end", "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":null}]}\n\n", 0, "stream ended early after 4 tokens (no finish_reason, no [DONE])"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.Header.Get("X-Request-Id"), "-probe") {
					streamTokens(w, true, 2, true, 2)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for i := range 4 {
					fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"},\"finish_reason\":null}]}\n\n", i)
				}
				io.WriteString(w, tc.tail) // the handler returns: the body ends cleanly
			})
			r, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: EndpointChat, Model: "m",
				NumPrompts: 5, InputLen: 2, OutputLen: 8})
			if err != nil {
				t.Fatal(err)
			}
			if r.Completed != tc.completed || r.Failed != 5-tc.completed {
				t.Fatalf("completed %d failed %d, want %d completed; errors %q", r.Completed, r.Failed, tc.completed, r.Errors)
			}
			if tc.wantErr == "" {
				if r.TotalOutputTokens != 20 || r.Perfgate.ErrorRateExceeded {
					t.Errorf("output tokens %d exceeded %v, want 20 and false", r.TotalOutputTokens, r.Perfgate.ErrorRateExceeded)
				}
				return
			}
			for i, e := range r.Errors {
				if e != tc.wantErr {
					t.Errorf("request %d error %q, want %q", i, e, tc.wantErr)
				}
			}
			if r.Perfgate.ErrorCounts[errStreamCut] != 5 || len(r.Perfgate.ErrorCounts) != 1 {
				t.Errorf("error counts %v, want 5 × %q", r.Perfgate.ErrorCounts, errStreamCut)
			}
			if r.TotalOutputTokens != 0 || !r.Perfgate.ErrorRateExceeded {
				t.Errorf("output tokens %d exceeded %v: a cut stream's tokens were counted or the budget not charged", r.TotalOutputTokens, r.Perfgate.ErrorRateExceeded)
			}
			var sum strings.Builder
			WriteSummary(&sum, r)
			if !strings.Contains(sum.String(), errStreamCut) {
				t.Errorf("summary does not show the cut streams:\n%s", sum.String())
			}
		})
	}
}

// A 404 for a model the server does serve means the route is missing: the
// hint names the other endpoint.
func TestProbeEndpoint404Hint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		endpoint, want string
	}{
		{EndpointCompletions, "try --backend openai-chat"},
		{EndpointChat, "try --backend openai ("},
	} {
		srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == tc.endpoint {
				w.WriteHeader(404)
				io.WriteString(w, `{"detail":"Not Found"}`)
				return
			}
			streamTokens(w, true, 2, true, 2)
		})
		_, err := Run(context.Background(), Options{Target: srv.URL, Endpoint: tc.endpoint, Model: "scripted-model",
			NumPrompts: 2, InputLen: 2, OutputLen: 2})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run error = %v, want the hint %q", tc.endpoint, err, tc.want)
		}
	}
}
