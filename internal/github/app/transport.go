package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/backoff"
)

// RetryPolicy bounds how GitHub API calls are retried.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 disables retries.
	MaxAttempts int
	// BaseDelay doubles per attempt, half of it jittered, up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// MaxRateLimitWait is the longest perfgate waits for a spent rate limit
	// to reset (or a Retry-After) before failing the call.
	MaxRateLimitWait time.Duration
	// Sleep waits d or until ctx ends; nil means a real timer. Tests
	// replace it so they never sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used for X-RateLimit-Reset; nil means time.Now.
	Now func() time.Time
}

// DefaultRetryPolicy: three tries within a few seconds, and up to 10 s for
// a rate limit. Longer outages and waits are the inbox's and the outbox's:
// they keep the work in the store and come back after GitHub's
// Retry-After, so no goroutine sleeps through a minute-long limit.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 3, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, MaxRateLimitWait: 10 * time.Second}
}

// RateLimitedError is returned instead of waiting for a reset that is too far
// away.
type RateLimitedError struct {
	Method, URL string
	Reset       time.Time
	Wait        time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("GitHub rate limit spent for %s %s: resets at %s (in %s); perfgate tries again then",
		e.Method, e.URL, e.Reset.UTC().Format(time.RFC3339), e.Wait.Round(time.Second))
}

// RetryAfter is how long GitHub asked to wait (the inbox and outbox
// schedule their next attempt by it).
func (e *RateLimitedError) RetryAfter() time.Duration { return e.Wait }

// RetryMiddleware retries GitHub API calls on 5xx answers and connection
// errors with exponential backoff and jitter, and honours Retry-After and a
// spent primary rate limit (X-RateLimit-Remaining: 0 with X-RateLimit-Reset).
// Plug it in with githubapp.WithClientMiddleware.
//
// A POST that creates something (a check run, a comment, an issue) is not
// sent again after a 5xx or a lost connection: GitHub may have applied it
// and lost only its answer, and a blind second POST leaves a check run
// queued forever beside its twin, or doubles a comment. Such a failure goes
// back to the caller — the outbox, which looks the effect up before it
// sends again. A POST is retried only when GitHub said it did not apply it
// (a rate limit), and token requests always (a spare token harms nothing).
func RetryMiddleware(p RetryPolicy) githubapp.ClientMiddleware {
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return &retryTransport{next: next, p: p}
	}
}

type retryTransport struct {
	next http.RoundTripper
	p    RetryPolicy
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		try := req
		if attempt > 1 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				// The body cannot be replayed; give up after the first try.
				return nil, fmt.Errorf("retry %s %s: request body cannot be replayed", req.Method, req.URL.Path)
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("retry %s %s: %w", req.Method, req.URL.Path, err)
			}
			try = req.Clone(ctx)
			try.Body = body
		}
		resp, err := t.next.RoundTrip(try)
		wait, retry, failErr := t.decide(req, resp, err, attempt)
		if failErr != nil {
			drain(resp)
			return nil, failErr
		}
		if !retry {
			return resp, err
		}
		drain(resp)
		if err := t.p.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s %s: waiting to retry: %w", req.Method, req.URL.Path, err)
		}
	}
}

// decide says whether to retry and after how long, or fails the call.
func (t *retryTransport) decide(req *http.Request, resp *http.Response, err error, attempt int) (time.Duration, bool, error) {
	if err != nil {
		if req.Context().Err() != nil || attempt >= t.p.MaxAttempts || (!replayable(req) && !notSent(err)) {
			return 0, false, nil
		}
		return t.backoff(attempt), true, nil
	}
	// A spent primary rate limit: wait for the reset when it is near.
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) && resp.Header.Get("X-RateLimit-Remaining") == "0" {
		reset, perr := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
		if perr == nil {
			at := time.Unix(reset, 0)
			wait := max(at.Sub(t.p.Now()), 0) + time.Second // the reset second itself may still be limited
			if wait > t.p.MaxRateLimitWait || attempt >= t.p.MaxAttempts {
				return 0, false, &RateLimitedError{Method: req.Method, URL: req.URL.Path, Reset: at, Wait: wait}
			}
			return wait, true, nil
		}
	}
	// Secondary rate limits and 503s may say how long to back off. A 5xx
	// says nothing of whether a POST was applied: it goes back to the caller.
	limited := resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests
	if !limited && !replayable(req) {
		return 0, false, nil
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" && (limited || resp.StatusCode >= 500) {
		if secs, perr := strconv.Atoi(ra); perr == nil {
			wait := time.Duration(secs) * time.Second
			if wait > t.p.MaxRateLimitWait {
				return 0, false, &RateLimitedError{Method: req.Method, URL: req.URL.Path, Reset: t.p.Now().Add(wait), Wait: wait}
			}
			if attempt >= t.p.MaxAttempts {
				return 0, false, nil
			}
			return wait, true, nil
		}
	}
	if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented && attempt < t.p.MaxAttempts {
		return t.backoff(attempt), true, nil
	}
	return 0, false, nil
}

// replayable reports whether sending req again cannot duplicate an effect
// on GitHub: reads, PATCHes and PUTs that set a state, DELETEs, and
// installation token requests. Other POSTs create something.
func replayable(req *http.Request) bool {
	if req.Method != http.MethodPost {
		return true
	}
	return strings.HasSuffix(req.URL.Path, "/access_tokens")
}

// notSent reports whether err means the request never reached GitHub (the
// connection could not be made), so even a POST may be sent again.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// backoff is the durable workers' delay (backoff.Policy.Delay: doubling
// from BaseDelay up to MaxDelay, half of it jittered), so an in-process
// retry and a stored one back off alike.
func (t *retryTransport) backoff(attempt int) time.Duration {
	return backoff.Policy{Base: t.p.BaseDelay, Max: t.p.MaxDelay}.Delay(attempt)
}

func drain(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
