package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ErrLeaseLost is returned when the server refused a call because the
// job's lease is no longer this agent's (409/410): abandon the job, stop
// its engine, and do not finish it.
var ErrLeaseLost = errors.New("lease lost: the server no longer holds this job for this agent")

// OffsetMismatchError is a 416 on a log upload: the server has Length bytes
// of the log; resend from there.
type OffsetMismatchError struct{ Length int64 }

func (e *OffsetMismatchError) Error() string {
	return fmt.Sprintf("log offset mismatch: the server has %d bytes", e.Length)
}

// StatusError is an answer the client does not retry.
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Status, e.Msg) }

// Backoff shapes the client's retries.
type Backoff struct {
	Initial time.Duration // first wait; 200 ms when 0
	Max     time.Duration // cap of one wait; 15 s when 0
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Server is the perfgate server's base URL.
	Server string
	// Token is the agent's own token. When empty, or when the server no
	// longer knows it (401), the client registers with RegistrationToken.
	Token             string
	RegistrationToken string
	Name              string
	Labels            []string
	GPUUUIDs          []string
	HTTP              *http.Client // http.DefaultClient's transport with no timeout when nil
	Backoff           Backoff
	Log               zerolog.Logger
}

// Client is the agent's side of the API. Every call retries connection
// errors, 5xx and 429 with exponential backoff and jitter (honouring
// Retry-After) until ctx ends. Safe for concurrent use.
type Client struct {
	cfg  ClientConfig
	base string
	http *http.Client

	mu      sync.Mutex
	token   string
	agentID int64
}

// NewClient returns a client of cfg.Server.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", cfg.Server)
	}
	if cfg.Token == "" && cfg.RegistrationToken == "" {
		return nil, errors.New("the agent needs --token (its own) or --registration-token (to register)")
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff.Initial = 200 * time.Millisecond
	}
	if cfg.Backoff.Max <= 0 {
		cfg.Backoff.Max = 15 * time.Second
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.Server, "/"), http: hc, token: cfg.Token}, nil
}

// Token is the agent token in use (after a registration, the new one).
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// Register exchanges the registration token for a new agent token.
func (c *Client) Register(ctx context.Context) (RegisterResponse, error) {
	if c.cfg.RegistrationToken == "" {
		return RegisterResponse{}, errors.New("register: no registration token configured")
	}
	var out RegisterResponse
	err := c.do(ctx, "register", "/api/v1/agents/register", nil, jsonBody(RegisterRequest{
		Name: c.cfg.Name, Labels: c.cfg.Labels, GPUUUIDs: c.cfg.GPUUUIDs,
	}), &out, c.cfg.RegistrationToken, false)
	if err != nil {
		return RegisterResponse{}, fmt.Errorf("register agent %q: %w", c.cfg.Name, err)
	}
	c.mu.Lock()
	c.token, c.agentID = out.Token, out.AgentID
	c.mu.Unlock()
	c.cfg.Log.Info().Int64("agent_id", out.AgentID).Msg("registered with the server")
	return out, nil
}

// Claim long-polls for a job for up to wait (the server may cap it). It
// returns nil, nil when there is none.
func (c *Client) Claim(ctx context.Context, wait time.Duration) (*ClaimResponse, error) {
	q := url.Values{"wait": {wait.String()}}
	var out ClaimResponse
	status, err := c.doStatus(ctx, "claim", "/api/v1/jobs/claim", q, jsonBody(struct{}{}), &out, "", true)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	return &out, nil
}

// Heartbeat renews the job's lease and says whether to cancel.
func (c *Client) Heartbeat(ctx context.Context, jobID int64, lease string) (HeartbeatResponse, error) {
	var out HeartbeatResponse
	err := c.do(ctx, "heartbeat", jobPath(jobID, "heartbeat"), nil, jsonBody(HeartbeatRequest{LeaseID: lease}), &out, "", true)
	if err != nil {
		return out, fmt.Errorf("heartbeat job %d: %w", jobID, err)
	}
	return out, nil
}

// AppendLog sends chunk at offset; it returns the stored length, or an
// *OffsetMismatchError with the length to resend from.
func (c *Client) AppendLog(ctx context.Context, jobID int64, lease string, offset int64, chunk []byte) (int64, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "lease_id": {lease}}
	var out LogResponse
	err := c.do(ctx, "logs", jobPath(jobID, "logs"), q, func() io.Reader { return bytes.NewReader(chunk) }, &out, "", true)
	if err != nil {
		return 0, fmt.Errorf("append log of job %d at %d: %w", jobID, offset, err)
	}
	return out.Length, nil
}

// PutResult uploads one run's result; a retry with the same key stores once.
func (c *Client) PutResult(ctx context.Context, jobID int64, req ResultRequest) (ResultResponse, error) {
	var out ResultResponse
	err := c.do(ctx, "results", jobPath(jobID, "results"), nil, jsonBody(req), &out, "", true)
	if err != nil {
		return out, fmt.Errorf("upload result %d of job %d: %w", req.RunIndex, jobID, err)
	}
	return out, nil
}

// Finish ends the job; a retry of a finish that landed is answered as such.
func (c *Client) Finish(ctx context.Context, jobID int64, req FinishRequest) (FinishResponse, error) {
	var out FinishResponse
	err := c.do(ctx, "finish", jobPath(jobID, "finish"), nil, jsonBody(req), &out, "", true)
	if err != nil {
		return out, fmt.Errorf("finish job %d as %s: %w", jobID, req.Status, err)
	}
	return out, nil
}

func jobPath(id int64, what string) string {
	return "/api/v1/jobs/" + strconv.FormatInt(id, 10) + "/" + what
}

// jsonBody marshals once and hands each attempt a fresh reader.
func jsonBody(v any) func() io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agentapi: encode %T: %v", v, err)) // only our own types
	}
	return func() io.Reader { return bytes.NewReader(b) }
}

func (c *Client) do(ctx context.Context, op, path string, q url.Values, body func() io.Reader, out any, token string, agentAuth bool) error {
	_, err := c.doStatus(ctx, op, path, q, body, out, token, agentAuth)
	return err
}

// doStatus sends one call, retrying what a retry can fix. token overrides
// the agent token (registration); agentAuth allows re-registering on 401.
func (c *Client) doStatus(ctx context.Context, op, path string, q url.Values, body func() io.Reader, out any, token string, agentAuth bool) (int, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	reregistered := false
	for attempt := 0; ; attempt++ {
		tok := token
		if tok == "" {
			tok = c.Token()
			if tok == "" && agentAuth {
				if _, err := c.Register(ctx); err != nil {
					return 0, err
				}
				tok = c.Token()
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body())
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			c.cfg.Log.Debug().Err(err).Str("op", op).Int("attempt", attempt).Msg("server unreachable: retrying")
		} else {
			status, retry, rerr := c.answer(resp, out)
			switch {
			case rerr == nil:
				return status, nil
			case status == http.StatusUnauthorized && agentAuth && token == "" && c.cfg.RegistrationToken != "" && !reregistered:
				// The server forgot this agent (a new database): register again.
				c.cfg.Log.Warn().Str("op", op).Msg("agent token refused: registering again")
				if _, err := c.Register(ctx); err != nil {
					return status, err
				}
				reregistered = true
				continue
			case !retry:
				return status, rerr
			}
			wait = retryAfter(resp.Header.Get("Retry-After"))
			c.cfg.Log.Debug().Err(rerr).Str("op", op).Int("attempt", attempt).Msg("server error: retrying")
		}
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// answer reads a response: nil error on 2xx, else the error and whether a
// retry may succeed.
func (c *Client) answer(resp *http.Response, out any) (int, bool, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	status := resp.StatusCode
	if err != nil {
		return status, true, fmt.Errorf("read answer: %w", err)
	}
	if status == http.StatusNoContent {
		return status, false, nil
	}
	if status >= 200 && status < 300 {
		if out != nil && len(data) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return status, false, fmt.Errorf("decode answer: %w", err)
			}
		}
		return status, false, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(data, &eb)
	msg := eb.Error
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	switch {
	case status == http.StatusConflict || status == http.StatusGone:
		return status, false, fmt.Errorf("%w (%s)", ErrLeaseLost, msg)
	case status == http.StatusRequestedRangeNotSatisfiable && eb.Length != nil:
		return status, false, &OffsetMismatchError{Length: *eb.Length}
	case status == http.StatusTooManyRequests || status >= 500:
		return status, true, &StatusError{Status: status, Msg: msg}
	default:
		return status, false, &StatusError{Status: status, Msg: msg}
	}
}

// backoff is full-jitter exponential: a random wait up to
// Initial·2^attempt, capped, so many agents do not retry in step.
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.cfg.Backoff.Initial << min(attempt, 16)
	if ceil > c.cfg.Backoff.Max || ceil <= 0 {
		ceil = c.cfg.Backoff.Max
	}
	return ceil/2 + rand.N(ceil/2+1)
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
