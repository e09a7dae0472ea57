package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

// A token GitHub revoked before its expiry answers 401: the client drops
// it, fetches a new one and retries the call once — instead of failing
// every call until the local clock says the token is old.
func TestRevokedTokenRenewedOn401(t *testing.T) {
	gh := ghtest.New(t)
	gh.SetPullRequest("acme/inference", 17, []byte(`{"number":17}`))
	cc, err := NewClientCreator(gh.AppConfig(), 5*time.Second, RetryPolicy{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := client.PullRequests.Get(ctx, "acme", "inference", 17); err != nil {
		t.Fatal(err)
	}
	gh.RevokeTokens()
	for i := range 3 {
		if _, _, err := client.PullRequests.Get(ctx, "acme", "inference", 17); err != nil {
			t.Fatalf("call %d after the revocation: %v", i, err)
		}
	}
	if n := gh.TokensIssued(); n != 2 {
		t.Errorf("%d tokens issued, want 2 (the first, then one after the 401)", n)
	}
	var unauthorized int
	for _, r := range gh.RequestsTo("GET", "/repos/acme/inference/pulls/17") {
		if r.Status == http.StatusUnauthorized {
			unauthorized++
		}
	}
	if unauthorized != 1 {
		t.Errorf("%d calls answered 401, want 1", unauthorized)
	}
	// A body is replayed on the retry.
	gh.RevokeTokens()
	if _, _, err := client.Issues.CreateComment(ctx, "acme", "inference", 17, &github.IssueComment{Body: github.String("hi")}); err != nil {
		t.Fatal(err)
	}
	if cs := gh.Comments(); len(cs) != 1 || cs[0].Body != "hi" {
		t.Errorf("comments = %+v", cs)
	}
	// The same client comes back for the installation (one token cache).
	again, _ := cc.NewInstallationClient(githubtest.InstallationID)
	if again != client {
		t.Error("installation clients are not cached")
	}
}

// When the installation itself is gone, the new token cannot be had either:
// the call fails once, it does not loop.
func TestUnauthorizedAfterRenewalFails(t *testing.T) {
	gh := ghtest.New(t)
	cc, err := NewClientCreator(gh.AppConfig(), 5*time.Second, RetryPolicy{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client, _ := cc.NewInstallationClient(999)
	_, _, err = client.PullRequests.Get(context.Background(), "acme", "inference", 17)
	if err == nil {
		t.Fatal("a call for an unknown installation succeeded")
	}
	if n := len(gh.Requests()); n > 2 {
		t.Errorf("%d requests for one failing call", n)
	}
}
