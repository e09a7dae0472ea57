// Package backoff holds the retry policy of perfgate's durable work — the
// webhook inbox, the outbox of GitHub writes, the judging of finished jobs
// — and the classification of errors into "try again later" (GitHub's
// 5xx, rate limits, lost connections) and "retrying cannot help" (a
// payload that does not parse, a 422). Workers keep their rows in the
// store between attempts, so a wait of minutes costs nothing.
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// Policy says when to try again.
type Policy struct {
	// Base is the first delay; it doubles per attempt up to Max.
	Base, Max time.Duration
	// MaxAttempts gives up after that many attempts (0: never give up on
	// a transient error).
	MaxAttempts int
}

// Default waits 1 s, 2 s, 4 s … up to 10 minutes between attempts.
func Default() Policy { return Policy{Base: time.Second, Max: 10 * time.Minute} }

// Delay is the wait after the attempt-th failed attempt (1-based): the
// doubling delay with "equal jitter" — half fixed, half random — so many
// rows failing together do not retry in lockstep, and none retries at once.
func (p Policy) Delay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Decision is what to do after a failed attempt.
type Decision struct {
	// GiveUp: the error is permanent or the attempts are spent.
	GiveUp bool
	// At is when to try again (when not giving up).
	At time.Time
}

// Next decides after the attempt-th attempt failed with err at now. A
// Retry-After (or a rate limit's reset) from GitHub wins over the
// doubling delay when it is longer.
func (p Policy) Next(now time.Time, attempt int, err error) Decision {
	if IsPermanent(err) || (p.MaxAttempts > 0 && attempt >= p.MaxAttempts) {
		return Decision{GiveUp: true}
	}
	wait := p.Delay(attempt)
	if after, ok := RetryAfter(err, now); ok && after > wait {
		wait = after
	}
	return Decision{At: now.Add(wait)}
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one that retrying cannot fix (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether retrying err is pointless: it was marked
// Permanent, or GitHub refused the request itself (400, 403 without a rate
// limit, 404, 410, 422 — the installation or resource is gone, or the
// request is invalid). 5xx, 401 (a revoked token), 408, 409, 429, rate
// limits, timeouts and connection errors are transient.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var p permanent
	if errors.As(err, &p) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return false
	}
	if code := statusOf(err); code != 0 {
		switch code {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusGone, http.StatusUnprocessableEntity:
			return true
		}
	}
	return false
}

// statusOf finds the HTTP status GitHub answered in err, or 0.
func statusOf(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	return 0
}

// retryAfter is implemented by errors that carry GitHub's wait (the app's
// RateLimitedError).
type retryAfter interface{ RetryAfter() time.Duration }

// RetryAfter is the wait GitHub asked for in err: a secondary rate limit's
// Retry-After, a spent primary limit's reset, or a transport's own
// estimate.
func RetryAfter(err error, now time.Time) (time.Duration, bool) {
	var ra retryAfter
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) && abuse.RetryAfter != nil {
		return *abuse.RetryAfter, true
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) && !rl.Rate.Reset.IsZero() {
		return max(rl.Rate.Reset.Sub(now), 0) + time.Second, true
	}
	return 0, false
}
