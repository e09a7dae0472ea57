package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ProbeError is a failed first request: the run did not start, because a
// benchmark whose every request fails the same way measures nothing. Msg
// is what the server (or the network) said; Hint says what to change.
type ProbeError struct {
	Msg  string
	Hint string
}

func (e *ProbeError) Error() string {
	if e.Hint == "" {
		return "first request failed: " + e.Msg
	}
	return "first request failed: " + e.Msg + "; " + e.Hint
}

// modelInfo is what GET /v1/models says.
type modelInfo struct {
	ids    []string
	maxLen map[string]int // max_model_len per model, when the server says
	err    error
	down   bool // no HTTP answer at all
}

// listModels reads GET /v1/models. vLLM lists each served model with its
// max_model_len.
func listModels(ctx context.Context, client *http.Client, target, apiKey string, timeout time.Duration) modelInfo {
	ctx, cancel := context.WithTimeout(ctx, min(timeout, 30*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/v1/models", nil)
	if err != nil {
		return modelInfo{err: err}
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return modelInfo{err: fmt.Errorf("target %s never answered: %s", target, cleanError(err)), down: true}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		msg := errorMessage(body)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return modelInfo{err: fmt.Errorf("list models at %s/v1/models: HTTP %d: %s", target, resp.StatusCode, msg)}
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
		return modelInfo{err: fmt.Errorf("list models at %s/v1/models: no model in the answer", target)}
	}
	mi := modelInfo{maxLen: map[string]int{}}
	for _, m := range list.Data {
		if m.ID != "" {
			mi.ids = append(mi.ids, m.ID)
			if m.MaxModelLen > 0 {
				mi.maxLen[m.ID] = m.MaxModelLen
			}
		}
	}
	if len(mi.ids) == 0 {
		return modelInfo{err: fmt.Errorf("list models at %s/v1/models: no model in the answer", target)}
	}
	return mi
}

// probeOutcome is what the first request taught about the server.
type probeOutcome struct {
	usage bool // it sent a usage block
}

// probe sends the first request alone before the run, as vllm bench
// serve's "initial test run" does: when the setup is wrong (a model the
// server does not serve, a wrong URL, a missing API key) every request
// would fail the same way, so the run stops with the server's own message
// and a hint. A refusal (4xx) stops at once; a 5xx, a stall or a refused
// connection is tried again, up to three times, or until ready (when
// ReadyTimeout is set) passes, for an engine that is still starting.
func probe(ctx context.Context, q *requester, req request, o *Options, models func() modelInfo) (probeOutcome, error) {
	attempts, wait := 3, 200*time.Millisecond
	var deadline time.Time
	if o.ReadyTimeout > 0 {
		deadline = time.Now().Add(o.ReadyTimeout)
		wait = time.Second
	}
	var rec record
	for try := 1; ; try++ {
		rec = record{}
		q.do(ctx, req, &rec)
		if rec.ok {
			return probeOutcome{usage: rec.usage}, nil
		}
		if ctx.Err() != nil {
			return probeOutcome{}, fmt.Errorf("benchmark interrupted: %w", ctx.Err())
		}
		permanent := rec.status >= 400 && rec.status < 500 && rec.status != http.StatusTooManyRequests
		more := try < attempts
		if !deadline.IsZero() {
			more = time.Now().Add(wait).Before(deadline)
		}
		if permanent || !more {
			break
		}
		select {
		case <-ctx.Done():
			return probeOutcome{}, fmt.Errorf("benchmark interrupted: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	target := strings.TrimSuffix(q.url, o.Endpoint)
	if rec.connErr {
		return probeOutcome{}, fmt.Errorf("target %s never answered: %s", target, rec.err)
	}
	return probeOutcome{}, &ProbeError{Msg: rec.err, Hint: probeHint(rec, target, o.Endpoint, q.model, models)}
}

// probeHint says what to change for the commonest setup mistakes.
func probeHint(rec record, target, endpoint, model string, models func() modelInfo) string {
	u, _ := url.Parse(target)
	if u != nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") && rec.status == http.StatusNotFound {
		return "drop /v1 from --target: it is the server's base URL, and --endpoint adds /v1/…"
	}
	switch rec.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "the server wants an API key: set OPENAI_API_KEY"
	case http.StatusNotFound, http.StatusBadRequest:
		mi := models()
		if mi.err != nil || len(mi.ids) == 0 {
			if rec.status == http.StatusNotFound {
				return "check --target and --endpoint: the server has no such route, or no model list at /v1/models; " + endpointHint(endpoint)
			}
			return ""
		}
		for _, id := range mi.ids {
			if id == model {
				// The model is right. A 404 then says the route is
				// missing: many servers (TGI, chat-only gateways) have
				// only one of the two endpoints.
				if rec.status == http.StatusNotFound {
					return endpointHint(endpoint)
				}
				return "" // the message says what else is wrong
			}
		}
		return fmt.Sprintf("the server serves %s; pass --model %s", strings.Join(mi.ids, ", "), mi.ids[0])
	}
	return ""
}

// endpointHint names the other endpoint, for a server that has no route
// at this one.
func endpointHint(endpoint string) string {
	if endpoint == EndpointChat {
		return "the server may have no " + EndpointChat + ": try --backend openai (" + EndpointCompletions + ")"
	}
	return "the server may have no " + EndpointCompletions + ": try --backend openai-chat (" + EndpointChat + ")"
}
