package app

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
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
			gh := ghtest.New(t)
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

// A POST that creates something is never sent twice on a failure that
// leaves GitHub's side uncertain (a 5xx, an answer lost after GitHub applied
// it): the caller — the outbox — looks the effect up first. A POST GitHub
// refused with a rate limit, and PATCHes, are replayed with their body.
func TestRetryNeverRepeatsACreate(t *testing.T) {
	const (
		comments = "/repos/acme/inference/issues/17/comments"
		checks   = "/repos/acme/inference/check-runs"
	)
	tests := []struct {
		name      string
		script    func(gh *githubtest.Server)
		call      func(c *github.Client) error
		method    string
		path      string
		wantCalls int
		wantErr   bool
		held      func(gh *githubtest.Server) int
		wantHeld  int
	}{
		{"comment: 502 goes back to the caller", func(gh *githubtest.Server) { gh.FailNext("POST", comments, 1, http.StatusBadGateway, nil) },
			createComment, "POST", comments, 1, true, func(gh *githubtest.Server) int { return len(gh.Comments()) }, 0},
		{"comment: applied, answer lost: one comment", func(gh *githubtest.Server) { gh.LoseAnswerNext("POST", comments, 1) },
			createComment, "POST", comments, 1, true, func(gh *githubtest.Server) int { return len(gh.Comments()) }, 1},
		{"check run: applied, answer lost: one run", func(gh *githubtest.Server) { gh.LoseAnswerNext("POST", checks, 1) },
			func(c *github.Client) error {
				_, _, err := c.Checks.CreateCheckRun(context.Background(), "acme", "inference", github.CreateCheckRunOptions{Name: "perfgate / quick", HeadSHA: "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"})
				return err
			}, "POST", checks, 1, true, func(gh *githubtest.Server) int { return len(gh.CheckRuns()) }, 1},
		{"comment: secondary rate limit is replayed", func(gh *githubtest.Server) {
			gh.FailNext("POST", comments, 1, http.StatusForbidden, http.Header{"Retry-After": {"1"}})
		}, createComment, "POST", comments, 2, false, func(gh *githubtest.Server) int { return len(gh.Comments()) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := ghtest.New(t)
			tt.script(gh)
			var waits []time.Duration
			err := tt.call(retryClient(t, gh, time.Now(), &waits))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			got := gh.RequestsTo(tt.method, tt.path)
			if len(got) != tt.wantCalls {
				t.Fatalf("%d calls, want %d", len(got), tt.wantCalls)
			}
			if tt.wantCalls > 1 && got[1].Body["body"] != "hello" {
				t.Errorf("replayed body = %v", got[1].Body)
			}
			if n := tt.held(gh); n != tt.wantHeld {
				t.Errorf("GitHub holds %d, want %d", n, tt.wantHeld)
			}
		})
	}
}

func createComment(c *github.Client) error {
	_, _, err := c.Issues.CreateComment(context.Background(), "acme", "inference", 17, &github.IssueComment{Body: github.String("hello")})
	return err
}

// A PATCH sets a state: sending it again after a 502 is safe, body and all.
func TestRetryReplaysPatch(t *testing.T) {
	t.Parallel()
	gh := ghtest.New(t)
	var waits []time.Duration
	c := retryClient(t, gh, time.Now(), &waits)
	run, _, err := c.Checks.CreateCheckRun(context.Background(), "acme", "inference", github.CreateCheckRunOptions{Name: "perfgate / quick", HeadSHA: "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"})
	if err != nil {
		t.Fatal(err)
	}
	path := "/repos/acme/inference/check-runs/" + strconv.FormatInt(run.GetID(), 10)
	gh.FailNext("PATCH", path, 1, http.StatusBadGateway, nil)
	if _, _, err := c.Checks.UpdateCheckRun(context.Background(), "acme", "inference", run.GetID(), github.UpdateCheckRunOptions{Name: "perfgate / quick", Status: github.String("in_progress")}); err != nil {
		t.Fatal(err)
	}
	got := gh.RequestsTo("PATCH", path)
	if len(got) != 2 || got[1].Body["status"] != "in_progress" {
		t.Errorf("requests = %+v, want the body sent twice", got)
	}
}
