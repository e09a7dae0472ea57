package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"golang.org/x/net/netutil"
)

func (h *HTTPConfig) setDefaults(longPoll time.Duration) {
	if h.ReadTimeout <= 0 {
		h.ReadTimeout = time.Minute
	}
	if h.WriteTimeout <= 0 {
		// A claim long-polls before it writes its answer.
		h.WriteTimeout = longPoll + time.Minute
	}
	if h.IdleTimeout <= 0 {
		h.IdleTimeout = time.Minute
	}
	if h.MaxConnections <= 0 {
		h.MaxConnections = 1024
	}
	if h.WebhookInFlightBytes <= 0 {
		h.WebhookInFlightBytes = 64 << 20
	}
}

// HTTPServer is the http.Server for Handler with every timeout set: a
// client that sends its headers, its body or nothing at all slowly, or
// reads its answer slowly, is cut off instead of holding a connection and
// its memory. (The webhook route reads its body under a shorter deadline
// of its own.)
func (s *Server) HTTPServer() *http.Server { return httpServer(s.cfg, s.handler) }

func httpServer(cfg Config, h http.Handler) *http.Server {
	cfg.HTTP.setDefaults(longPoll(cfg))
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

func longPoll(cfg Config) time.Duration {
	if cfg.LongPoll > 0 {
		return cfg.LongPoll
	}
	return agentapi.DefaultLongPoll
}

// Listener bounds ln to the configured number of open connections: more
// wait in the kernel's backlog rather than each costing a goroutine and
// buffers.
func (s *Server) Listener(ln net.Listener) net.Listener { return limitListener(s.cfg, ln) }

func limitListener(cfg Config, ln net.Listener) net.Listener {
	cfg.HTTP.setDefaults(longPoll(cfg))
	return netutil.LimitListener(limitPerIP(ln, cfg.HTTP.MaxConnectionsPerIP), cfg.HTTP.MaxConnections)
}

// agentRouteLimits are the agent API's body limits per route, enforced
// before the agent is authenticated: a result carries every request's
// timings (a few MB for thousands of prompts), a log chunk at most 1 MiB,
// everything else is small.
var agentRouteLimits = []struct {
	pattern string
	limit   int64
}{
	{"/api/v1/agents/register", 64 << 10},
	{"/api/v1/jobs/claim", 4 << 10},
	{"/api/v1/jobs/{id}/heartbeat", 64 << 10},
	{"/api/v1/jobs/{id}/logs", 1<<20 + 64<<10},
	{"/api/v1/jobs/{id}/results", 64 << 20},
	{"/api/v1/jobs/{id}/finish", 64 << 10},
}

// defaultAgentLimit applies to any other agent API path.
const defaultAgentLimit = 64 << 10

// agentBodyLimits gives every agent API route its own body limit: a body
// declared too large is refused with 413 before anything is read, and a
// body that turns out larger stops at the limit.
func agentBodyLimits(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, r := range agentRouteLimits {
		mux.Handle(r.pattern, limitBody(r.limit, next))
	}
	mux.Handle("/api/v1/", limitBody(defaultAgentLimit, next))
	return mux
}

func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error": fmt.Sprintf("request body of %d bytes is over this route's limit of %d bytes: send less", r.ContentLength, limit),
			})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}
