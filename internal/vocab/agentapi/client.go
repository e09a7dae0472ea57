package agentapi

import (
	"bytes"
	"cmp"
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

	"github.com/perfgate/perfgate/internal/analysis/fleet"
)

// ErrLeaseLost is returned when the server refused a call because the
// job's lease is no longer this agent's (409/410): abandon the job, stop
// its engine, and do not finish it.
var ErrLeaseLost = errors.New("lease lost: the server no longer holds this job for this agent")

// ErrRunStored is returned when the server already holds a result for the
// run under another idempotency key (409 run_stored): the run must not be
// uploaded twice. The lease is still this agent's.
var ErrRunStored = errors.New("the run already has a result on the server")

// ErrLogFull is returned when the job's log reached MaxJobLog (413): stop
// sending the log; the job goes on.
var ErrLogFull = errors.New("the job log is full on the server")

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
	// PreviousToken is the token this runner's name held before (its saved
	// identity) when it registers again without using it: the server
	// refuses a name in use to a registration that cannot present it.
	PreviousToken string
	Name          string
	Labels        []string
	GPUUUIDs      []string
	// Cards describe the GPUs at registration (the server labels the agent
	// with their model, memory and driver).
	Cards   []fleet.Card
	HTTP    *http.Client // a plain client when nil; every call has its own deadline
	Backoff Backoff
	// Timeout bounds one attempt of a call (a claim adds its long poll, a
	// result upload gets four times as long); 30 s when 0.
	Timeout time.Duration
	Log     zerolog.Logger
	// OnRegister, when set, is called with every new registration (the
	// first, and any after the server forgot the agent), so the agent can
	// save its token and reuse it after a restart.
	OnRegister func(RegisterResponse) error
	// PendingToken is a token this runner proposed in a registration whose
	// answer it never saw (saved by OnPropose before a restart): the server
	// may hold it. A 401 on Token tries it, and the next registration
	// proposes it again.
	PendingToken string
	// OnPropose, when set, is called with the token a registration is
	// about to propose, before it is sent, so the agent can save it: a
	// runner stopped before the answer then still has the token the server
	// may hold.
	OnPropose func(token string) error
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
	// pending is the token proposed in a registration not yet answered.
	pending string
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
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultCallTimeout
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.Server, "/"), http: hc, token: cfg.Token, pending: cfg.PendingToken}, nil
}

// Token is the agent token in use (after a registration, the new one).
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// Register exchanges the registration token for a new agent token. The
// token is the runner's proposal, saved (OnPropose) before it is sent and
// proposed again until an answer comes; once sent, the call reads its
// answer even when ctx ends (its own deadline bounds it), so a runner
// stopped while registering keeps the token the server now holds.
func (c *Client) Register(ctx context.Context) (RegisterResponse, error) {
	if c.cfg.RegistrationToken == "" {
		return RegisterResponse{}, errors.New("register: no registration token configured")
	}
	if err := ctx.Err(); err != nil {
		return RegisterResponse{}, fmt.Errorf("register agent %q: %w", c.cfg.Name, err)
	}
	proposed, err := c.proposal()
	if err != nil {
		return RegisterResponse{}, fmt.Errorf("register agent %q: %w", c.cfg.Name, err)
	}
	var out RegisterResponse
	_, _, err = c.send(ctx, request{op: "register", method: http.MethodPost, path: "/api/v1/agents/register", body: jsonBody(RegisterRequest{
		Name: c.cfg.Name, Labels: c.cfg.Labels, GPUUUIDs: c.cfg.GPUUUIDs, Cards: c.cfg.Cards, PreviousToken: cmp.Or(c.Token(), c.cfg.PreviousToken),
		Token: proposed,
	}), out: &out, token: c.cfg.RegistrationToken, timeout: c.cfg.Timeout, detached: true})
	if err != nil {
		return RegisterResponse{}, fmt.Errorf("register agent %q: %w", c.cfg.Name, err)
	}
	c.mu.Lock()
	c.token, c.agentID, c.pending = out.Token, out.AgentID, ""
	c.mu.Unlock()
	c.cfg.Log.Info().Int64("agent_id", out.AgentID).Msg("registered with the server")
	if c.cfg.OnRegister != nil {
		if err := c.cfg.OnRegister(out); err != nil {
			return out, fmt.Errorf("register agent %q: save the new token: %w", c.cfg.Name, err)
		}
	}
	return out, nil
}

// proposal is the token the next registration proposes: the pending one,
// or a new one, saved first.
func (c *Client) proposal() (string, error) {
	c.mu.Lock()
	tok := c.pending
	c.mu.Unlock()
	if tok != "" {
		return tok, nil
	}
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	if c.cfg.OnPropose != nil {
		if err := c.cfg.OnPropose(tok); err != nil {
			return "", fmt.Errorf("save the proposed token: %w", err)
		}
	}
	c.mu.Lock()
	c.pending = tok
	c.mu.Unlock()
	return tok, nil
}

// tryPending switches from refused, the token the server just refused, to
// the pending token, which the server may hold (a registration whose
// answer was lost). It reports whether there was one to try.
func (c *Client) tryPending(refused string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == "" || c.token != refused || c.pending == refused {
		return false
	}
	c.token = c.pending
	c.cfg.Log.Warn().Msg("agent token refused: trying the token of a registration whose answer was lost")
	return true
}

// settlePending ends a try of the pending token: kept, it is the agent's
// token (saved as a registration); refused, the agent goes back to from,
// the token the name held, which a registration again must present.
func (c *Client) settlePending(from string, held bool) error {
	c.mu.Lock()
	if !held {
		if c.token == c.pending {
			c.token = from
		}
		c.mu.Unlock()
		return nil
	}
	out := RegisterResponse{AgentID: c.agentID, Token: c.token}
	if c.pending == out.Token {
		c.pending = ""
	}
	c.mu.Unlock()
	c.cfg.Log.Info().Msg("the server holds the token of the lost registration's answer: using it")
	if c.cfg.OnRegister != nil {
		if err := c.cfg.OnRegister(out); err != nil {
			return fmt.Errorf("save the agent token: %w", err)
		}
	}
	return nil
}

// Claim long-polls for a job for up to wait (the server may cap it). It
// returns nil, nil when there is none.
func (c *Client) Claim(ctx context.Context, wait time.Duration) (*ClaimResponse, error) {
	q := url.Values{"wait": {wait.String()}}
	var out ClaimResponse
	status, _, err := c.send(ctx, request{op: "claim", method: http.MethodPost, path: "/api/v1/jobs/claim", q: q,
		body: jsonBody(struct{}{}), out: &out, agentAuth: true, timeout: wait + min(claimSlack, c.cfg.Timeout)})
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

// Source streams the tree of one of the job's commits: GitHub's tarball
// (gzip tar with one top directory), through the server. The caller reads
// and closes it; a body that stalls for 2 minutes fails the read.
func (c *Client) Source(ctx context.Context, jobID int64, lease, sha string) (io.ReadCloser, error) {
	q := url.Values{"sha": {sha}, "lease_id": {lease}}
	_, body, err := c.send(ctx, request{op: "source", method: http.MethodGet, path: jobPath(jobID, "source"), q: q,
		agentAuth: true, timeout: c.cfg.Timeout, stream: true})
	if err != nil {
		return nil, fmt.Errorf("fetch source %s of job %d: %w", sha, jobID, err)
	}
	return body, nil
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

// Per-attempt deadlines: one call that hangs (a wedged server, a dropped
// connection without a reset) is given up and retried instead of stalling
// the agent. A claim may take its long poll on top.
const (
	defaultCallTimeout = 30 * time.Second
	claimSlack         = 15 * time.Second
	// sourceIdle is how long a tree download may go without a byte.
	sourceIdle = 2 * time.Minute
	// warnAfter is the attempt from which retries log at warn: a server
	// that is down for more than a moment is something to see.
	warnAfter = 2
)

// request is one API call.
type request struct {
	op, method, path string
	q                url.Values
	body             func() io.Reader // nil: no body
	out              any
	token            string // overrides the agent token (registration)
	agentAuth        bool   // may re-register on 401
	timeout          time.Duration
	stream           bool // return the body of a 2xx unread
	// detached: once sent, the attempt reads its answer even when ctx
	// ends (a registration the server may have applied).
	detached bool
}

func (c *Client) do(ctx context.Context, op, path string, q url.Values, body func() io.Reader, out any, token string, agentAuth bool) error {
	timeout := c.cfg.Timeout
	if op == "results" {
		timeout *= 4 // a result carries every request's timings
	}
	_, _, err := c.send(ctx, request{op: op, method: http.MethodPost, path: path, q: q, body: body, out: out,
		token: token, agentAuth: agentAuth, timeout: timeout})
	return err
}

// send makes one call, retrying what a retry can fix: connection errors,
// timeouts, 5xx and 429, with backoff, until ctx ends. token overrides the
// agent token (registration); agentAuth allows re-registering on 401.
func (c *Client) send(ctx context.Context, rq request) (int, io.ReadCloser, error) {
	u := c.base + rq.path
	if len(rq.q) > 0 {
		u += "?" + rq.q.Encode()
	}
	reregistered, triedPending := false, false
	tryingFrom := ""    // the refused token, while the pending one is tried
	var since time.Time // first failure of this call
	for attempt := 0; ; attempt++ {
		tok, err := c.callToken(ctx, rq)
		if err != nil {
			return 0, nil, err
		}
		status, body, retry, err := c.attempt(ctx, rq, u, tok)
		if tryingFrom != "" && (err == nil || status == http.StatusUnauthorized) {
			if serr := c.settlePending(tryingFrom, err == nil); serr != nil {
				c.cfg.Log.Error().Err(serr).Msg("the agent token in use is not saved: a restart registers again")
			}
			tryingFrom = ""
		}
		switch {
		case err == nil:
			if !since.IsZero() {
				c.cfg.Log.Info().Str("op", rq.op).Int("attempts", attempt+1).Dur("after", time.Since(since).Round(time.Millisecond)).
					Msg("server reachable again")
			}
			return status, body, nil
		case ctx.Err() != nil:
			return 0, nil, ctx.Err()
		case status == http.StatusUnauthorized && rq.agentAuth && rq.token == "" && !triedPending && c.tryPending(tok):
			// A registration's answer was lost: the server may hold the
			// token it proposed.
			tryingFrom, triedPending = tok, true
			continue
		case status == http.StatusUnauthorized && rq.agentAuth && rq.token == "" && c.cfg.RegistrationToken != "" && !reregistered:
			// The server forgot this agent (a new database): register again.
			c.cfg.Log.Warn().Str("op", rq.op).Msg("agent token refused: registering again")
			if _, err := c.Register(ctx); err != nil {
				return status, nil, err
			}
			reregistered = true
			continue
		case !retry:
			return status, nil, err
		}
		if since.IsZero() {
			since = time.Now()
		}
		t := time.NewTimer(c.retryWait(rq, attempt, status, err, since))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// callToken is the token a call sends: its own (registration), else the
// agent's, registering first when the agent has none yet.
func (c *Client) callToken(ctx context.Context, rq request) (string, error) {
	if rq.token != "" {
		return rq.token, nil
	}
	tok := c.Token()
	if tok == "" && rq.agentAuth {
		if _, err := c.Register(ctx); err != nil {
			return "", err
		}
		tok = c.Token()
	}
	return tok, nil
}

// retryWait logs a failed attempt that will be retried and returns how
// long to wait: the server's Retry-After, else the backoff.
func (c *Client) retryWait(rq request, attempt, status int, err error, since time.Time) time.Duration {
	var wait time.Duration
	var ra *retryAfterError
	if errors.As(err, &ra) {
		wait = ra.wait
	}
	ev := c.cfg.Log.Debug()
	if attempt >= warnAfter {
		ev = c.cfg.Log.Warn()
	}
	what := "server error: retrying"
	if status == 0 {
		what = "server unreachable: retrying"
	}
	ev.Err(err).Str("op", rq.op).Int("attempt", attempt+1).Dur("failing_for", time.Since(since).Round(time.Millisecond)).
		Str("server", c.base).Msg(what)
	if wait <= 0 {
		wait = c.backoff(attempt)
	}
	return wait
}

// attempt sends the call once under its own deadline. status is 0 when
// no answer came.
func (c *Client) attempt(ctx context.Context, rq request, u, tok string) (status int, body io.ReadCloser, retry bool, err error) {
	parent := ctx
	if rq.detached {
		parent = context.WithoutCancel(ctx)
	}
	actx, cancel := context.WithCancel(parent)
	timer := time.AfterFunc(rq.timeout, cancel)
	var rd io.Reader
	if rq.body != nil {
		rd = rq.body()
	}
	req, err := http.NewRequestWithContext(actx, rq.method, u, rd)
	if err != nil {
		timer.Stop()
		cancel()
		return 0, nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		timer.Stop()
		cancel()
		if ctx.Err() != nil {
			return 0, nil, false, ctx.Err()
		}
		if actx.Err() != nil {
			err = fmt.Errorf("no answer within %s: %w", rq.timeout, err)
		}
		return 0, nil, true, err
	}
	if rq.stream && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The deadline covered the answer's head; from here on the body
		// must keep moving, however long it is.
		timer.Stop()
		return resp.StatusCode, newIdleReader(resp.Body, sourceIdle, cancel), false, nil
	}
	defer cancel()
	defer timer.Stop()
	status, retry, err = c.answer(resp, rq.out)
	if err != nil && retry {
		if w := retryAfter(resp.Header.Get("Retry-After")); w > 0 {
			err = &retryAfterError{err: err, wait: w}
		}
	}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		err, retry = fmt.Errorf("answer not read within %s: %w", rq.timeout, err), true
	}
	return status, nil, retry, err
}

// retryAfterError carries the server's Retry-After to the retry loop.
type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// idleReader cancels a download that goes idle-long without a byte.
type idleReader struct {
	rc     io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
}

func newIdleReader(rc io.ReadCloser, idle time.Duration, cancel context.CancelFunc) *idleReader {
	return &idleReader{rc: rc, idle: idle, timer: time.AfterFunc(idle, cancel), cancel: cancel}
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}

func (r *idleReader) Close() error {
	r.timer.Stop()
	err := r.rc.Close()
	r.cancel()
	return err
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
	case status == http.StatusConflict && eb.Code == CodeRunStored:
		return status, false, fmt.Errorf("%w (%s)", ErrRunStored, msg)
	case status == http.StatusRequestEntityTooLarge && eb.Code == CodeLogFull:
		return status, false, fmt.Errorf("%w (%s)", ErrLogFull, msg)
	case status == http.StatusConflict || status == http.StatusGone:
		return status, false, fmt.Errorf("%w (%s)", ErrLeaseLost, msg)
	case status == http.StatusRequestedRangeNotSatisfiable && eb.Length != nil:
		return status, false, &OffsetMismatchError{Length: *eb.Length}
	case status == http.StatusTooManyRequests || (status >= 500 && status != http.StatusNotImplemented):
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
