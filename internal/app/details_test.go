package app

import (
	"context"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/githubtest"
)

// Each check run links to its own dashboard page when Details is set.
func TestChecksDetailsLinkPerCheckRun(t *testing.T) {
	gh := githubtest.New(t)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	client, err := cc.NewInstallationClient(githubtest.InstallationID)
	if err != nil {
		t.Fatal(err)
	}
	c := Checks{DetailsURL: "https://perfgate.example", Details: func(repo, sha string, tier Tier) string {
		return "https://perfgate.example/r/" + repo + "/checks/" + sha + "/" + string(tier) + "?access=x"
	}}
	ctx := context.Background()
	if _, err := c.Queue(ctx, client, "acme", "inference", TierQuick, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 17, Output{Title: "q", Summary: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Conclude(ctx, client, "acme", "inference", TierMerge, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 0, VerdictSkipped, Output{Title: "s", Summary: "s"}); err != nil {
		t.Fatal(err)
	}
	reqs := gh.RequestsTo("POST", "/repos/acme/inference/check-runs")
	want := []string{"https://perfgate.example/r/acme/inference/checks/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/quick?access=x", "https://perfgate.example/r/acme/inference/checks/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/merge?access=x"}
	if len(reqs) != 2 {
		t.Fatalf("%d check runs created", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Body["details_url"]; got != want[i] {
			t.Errorf("check run %d details_url = %v, want %s", i, got, want[i])
		}
	}
	// Without Details, the one public URL as before.
	if _, err := (Checks{DetailsURL: "https://perfgate.example"}).Queue(ctx, client, "acme", "inference", TierQuick, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 17, Output{}); err != nil {
		t.Fatal(err)
	}
	if got := gh.RequestsTo("POST", "/repos/acme/inference/check-runs")[2].Body["details_url"]; got != "https://perfgate.example" {
		t.Errorf("details_url without Details = %v", got)
	}
}
