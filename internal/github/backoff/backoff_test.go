package backoff

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

func ghErr(code int) error {
	return fmt.Errorf("create check run: %w", &github.ErrorResponse{Response: &http.Response{StatusCode: code, Request: &http.Request{Method: "POST"}}, Message: http.StatusText(code)})
}

type waitErr time.Duration

func (w waitErr) Error() string             { return "rate limited" }
func (w waitErr) RetryAfter() time.Duration { return time.Duration(w) }

func TestClassify(t *testing.T) {
	t.Parallel()
	ninety := 90 * time.Second
	tests := []struct {
		name      string
		err       error
		permanent bool
		after     time.Duration
	}{
		{"502", ghErr(502), false, 0},
		{"503", ghErr(503), false, 0},
		{"401 revoked token", ghErr(401), false, 0},
		{"429", ghErr(429), false, 0},
		{"404 gone", ghErr(404), true, 0},
		{"422 invalid", ghErr(422), true, 0},
		{"403 no permission", ghErr(403), true, 0},
		{"secondary rate limit", fmt.Errorf("x: %w", &github.AbuseRateLimitError{Response: &http.Response{StatusCode: 403}, RetryAfter: &ninety}), false, ninety},
		{"transport wait", fmt.Errorf("x: %w", waitErr(2*time.Minute)), false, 2 * time.Minute},
		{"marked", Permanent(errors.New("parse payload")), true, 0},
		{"connection reset", errors.New("read: connection reset by peer"), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPermanent(tt.err); got != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.permanent)
			}
			got, ok := RetryAfter(tt.err, time.Now())
			if ok != (tt.after > 0) || got != tt.after {
				t.Errorf("RetryAfter = %v %v, want %v", got, ok, tt.after)
			}
		})
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Max: time.Minute, MaxAttempts: 5}
	now := time.Unix(1000, 0)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second} {
		for range 50 {
			d := p.Next(now, attempt, ghErr(502))
			if d.GiveUp {
				t.Fatalf("attempt %d gave up", attempt)
			}
			if wait := d.At.Sub(now); wait < want/2 || wait > want {
				t.Errorf("attempt %d: wait %v, want within [%v, %v]", attempt, wait, want/2, want)
			}
		}
	}
	if !p.Next(now, 5, ghErr(502)).GiveUp {
		t.Error("did not give up after MaxAttempts")
	}
	if !p.Next(now, 1, ghErr(422)).GiveUp {
		t.Error("retried a permanent error")
	}
	if d := p.Next(now, 1, waitErr(3*time.Minute)); d.At.Sub(now) != 3*time.Minute {
		t.Errorf("Retry-After not honoured: %v", d.At.Sub(now))
	}
	if d := (Policy{Base: time.Second, Max: 10 * time.Second}).Delay(40); d > 10*time.Second || d < 5*time.Second {
		t.Errorf("delay at attempt 40 = %v, want capped at 10s", d)
	}
}
