package app

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/githubtest"
)

// retryClient is an installation client against the fake, with the retry
// middleware using a fake clock and recording the waits it would sleep.
func retryClient(t *testing.T, gh *githubtest.Server, now time.Time, waits *[]time.Duration) *github.Client {
	t.Helper()
	p := RetryPolicy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, MaxRateLimitWait: time.Minute,
		Now:   func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { *waits = append(*waits, d); return nil }}
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig(), githubapp.WithClientMiddleware(RetryMiddleware(p)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRetryTransport(t *testing.T) {
	const prPath = "/repos/acme/inference/pulls/17"
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name      string
		script    func(gh *githubtest.Server)
		wantCalls int
		wantErr   func(error) bool
		checkWait func([]time.Duration) bool
	}{
		{"502 then success", func(gh *githubtest.Server) { gh.FailNext("GET", prPath, 2, http.StatusBadGateway, nil) }, 3, nil,
			func(w []time.Duration) bool {
				return len(w) == 2 && w[0] <= 100*time.Millisecond && w[1] <= 200*time.Millisecond
			}},
		{"5xx attempts bounded", func(gh *githubtest.Server) { gh.FailNext("GET", prPath, 10, http.StatusServiceUnavailable, nil) }, 4,
			func(err error) bool { return err != nil }, func(w []time.Duration) bool { return len(w) == 3 }},
		{"404 not retried", func(gh *githubtest.Server) { gh.FailNext("GET", prPath, 1, http.StatusNotFound, nil) }, 1,
			func(err error) bool { return err != nil }, func(w []time.Duration) bool { return len(w) == 0 }},
		{"Retry-After honoured", func(gh *githubtest.Server) {
			gh.FailNext("GET", prPath, 1, http.StatusForbidden, http.Header{"Retry-After": {"7"}})
		}, 2, nil, func(w []time.Duration) bool { return len(w) == 1 && w[0] == 7*time.Second }},
		{"short rate-limit reset waited out", func(gh *githubtest.Server) { gh.RateLimitNext("GET", prPath, 1, now.Add(20*time.Second)) }, 2, nil,
			func(w []time.Duration) bool { return len(w) == 1 && w[0] == 21*time.Second }},
		{"long rate-limit reset fails clearly", func(gh *githubtest.Server) { gh.RateLimitNext("GET", prPath, 1, now.Add(time.Hour)) }, 1,
			func(err error) bool {
				var rl *RateLimitedError
				return errors.As(err, &rl) && rl.Reset.Equal(now.Add(time.Hour))
			}, func(w []time.Duration) bool { return len(w) == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gh := githubtest.New(t)
			gh.SetPullRequest("acme/inference", 17, []byte(`{"number":17}`))
			tt.script(gh)
			var waits []time.Duration
			_, _, err := retryClient(t, gh, now, &waits).PullRequests.Get(context.Background(), "acme", "inference", 17)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != nil && !tt.wantErr(err) {
				t.Fatalf("unexpected err = %v", err)
			}
			if n := len(gh.RequestsTo("GET", prPath)); n != tt.wantCalls {
				t.Errorf("calls = %d, want %d", n, tt.wantCalls)
			}
			if !tt.checkWait(waits) {
				t.Errorf("waits = %v", waits)
			}
		})
	}
}

func TestRetryReplaysBody(t *testing.T) {
	gh := githubtest.New(t)
	gh.FailNext("POST", "/repos/acme/inference/issues/17/comments", 1, http.StatusBadGateway, nil)
	var waits []time.Duration
	c := retryClient(t, gh, time.Now(), &waits)
	if _, _, err := c.Issues.CreateComment(context.Background(), "acme", "inference", 17, &github.IssueComment{Body: github.String("hello")}); err != nil {
		t.Fatal(err)
	}
	got := gh.RequestsTo("POST", "/repos/acme/inference/issues/17/comments")
	if len(got) != 2 || got[1].Body["body"] != "hello" {
		t.Errorf("requests = %+v, want the body sent twice", got)
	}
}
