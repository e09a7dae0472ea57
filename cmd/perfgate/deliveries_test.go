package main

import (
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
)

// perfgate deliveries redeliver asks GitHub to send again each delivery
// that failed in the window and was not delivered since under its GUID;
// --dry-run sends nothing.
func TestDeliveriesRedeliver(t *testing.T) {
	gh := ghtest.New(t)
	now := time.Now()
	gh.SetHookDeliveries([]githubtest.HookDelivery{ // newest first
		{ID: 7, GUID: "a", DeliveredAt: now.Add(-1 * time.Minute), StatusCode: 202, Event: "pull_request", Action: "opened", Redelivery: true},
		{ID: 6, GUID: "b", DeliveredAt: now.Add(-2 * time.Minute), StatusCode: 503, Event: "issue_comment", Action: "created"},
		{ID: 5, GUID: "c", DeliveredAt: now.Add(-3 * time.Minute), StatusCode: 0, Event: "pull_request", Action: "closed"},
		{ID: 4, GUID: "c", DeliveredAt: now.Add(-4 * time.Minute), StatusCode: 502, Event: "pull_request", Action: "closed"},
		{ID: 3, GUID: "a", DeliveredAt: now.Add(-5 * time.Minute), StatusCode: 502, Event: "pull_request", Action: "opened"},
		{ID: 2, GUID: "d", DeliveredAt: now.Add(-6 * time.Minute), StatusCode: 202, Event: "pull_request", Action: "synchronize"},
		{ID: 1, GUID: "e", DeliveredAt: now.Add(-3 * time.Hour), StatusCode: 502, Event: "pull_request", Action: "opened"},
	})
	t.Setenv("PERFGATE_DATA_DIR", t.TempDir())
	t.Setenv("PERFGATE_GITHUB_V3_API_URL", gh.URL+"/")
	t.Setenv("PERFGATE_GITHUB_APP_INTEGRATION_ID", "31337")
	t.Setenv("PERFGATE_GITHUB_APP_WEBHOOK_SECRET", githubtest.WebhookSecret)
	t.Setenv("PERFGATE_GITHUB_APP_PRIVATE_KEY", string(gh.KeyPEM))
	t.Setenv("PERFGATE_AGENT_REGISTRATION_TOKEN", "a-registration-token-of-some-length")

	code, out, errOut := run(t, "deliveries", "redeliver", "--dry-run")
	if code != 0 || !strings.Contains(out, "would redeliver b issue_comment.created") || len(gh.Redelivered()) != 0 {
		t.Fatalf("dry run: %d %q %q, redelivered %v", code, out, errOut, gh.Redelivered())
	}
	code, out, errOut = run(t, "deliveries", "redeliver", "--since", "1h")
	if code != 0 {
		t.Fatalf("redeliver: %d %q %q", code, out, errOut)
	}
	// b failed; c failed twice (its newest attempt is sent again); a was
	// redelivered already, d delivered, e is older than the window.
	if got := gh.Redelivered(); len(got) != 2 || got[0] != 6 || got[1] != 5 {
		t.Errorf("redelivered %v, want [6 5]\n%s", got, out)
	}
}
