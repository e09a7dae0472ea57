package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProbeWaitsForAModel: an engine that listens before it has a model
// (Ollama until `ollama create` ends) is not ready and not broken; once it
// lists the model it is ready.
func TestProbeWaitsForAModel(t *testing.T) {
	t.Parallel()
	var created atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/version":
			fmt.Fprint(w, `{"version":"0.9.6"}`)
		case "/v1/models":
			if created.Load() {
				fmt.Fprint(w, `{"object":"list","data":[{"id":"tiny:latest","object":"model"}]}`)
				return
			}
			fmt.Fprint(w, `{"object":"list","data":null}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	s := &Server{spec: Spec{ReadinessPath: "/api/version", Model: "tiny:latest"}, baseURL: ts.URL}
	ok, status, err := s.probe(context.Background(), ts.Client())
	if ok || err != nil || !strings.Contains(status, "no model yet") {
		t.Fatalf("before create: ok %v status %q err %v", ok, status, err)
	}
	created.Store(true)
	if ok, status, err := s.probe(context.Background(), ts.Client()); !ok || err != nil {
		t.Fatalf("after create: ok %v status %q err %v", ok, status, err)
	}
}
