package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store/storetest"
)

// TestPullRequestRegressionWarnsThenEscalates drives the whole loop: a
// signed pull_request webhook → a queued check → an agent measures the
// slowed simulated engine → a neutral warning with the table and one
// comment to the author → 48 hours later a blocking failure and a second
// comment.
func TestPullRequestRegressionWarnsThenEscalates(t *testing.T) {
	warnThenEscalate(t, t.TempDir())
}

// The same loop on PostgreSQL, the store several server replicas share.
func TestPullRequestRegressionOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine for ~30 s")
	}
	warnThenEscalate(t, storetest.PostgresDSN(t))
}

func warnThenEscalate(t *testing.T, dir string) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine for ~30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := Run(ctx, Options{Dir: dir, Slowdown: 1.3, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	w := out.Warning
	if w.Conclusion != "neutral" {
		t.Errorf("first verdict on a regression: conclusion %q, want neutral (a warning)", w.Conclusion)
	}
	if want := []string{"queued", "in_progress", "completed"}; strings.Join(w.Statuses, ",") != strings.Join(want, ",") {
		t.Errorf("check statuses %v, want %v", w.Statuses, want)
	}
	if w.HeadSHA != "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f" {
		t.Errorf("check on %s, want the PR's head SHA", w.HeadSHA)
	}
	for _, want := range []string{"| metric", "| TPOT median", "❌ regression", "/perf retest", "/perf appeal"} {
		if !strings.Contains(w.Summary, want) {
			t.Errorf("warning summary lacks %q:\n%s", want, w.Summary)
		}
	}
	if out.Escalated.Conclusion != "failure" {
		t.Errorf("after 48 h: conclusion %q, want failure", out.Escalated.Conclusion)
	}
	if len(out.Comments) != 2 {
		t.Fatalf("PR comments: %d, want 2 (the warning and the escalation)", len(out.Comments))
	}
	if !strings.Contains(out.Comments[0].Body, "@octocat") || !strings.Contains(out.Comments[0].Body, "warning") {
		t.Errorf("warning comment should mention the author and say it is a warning:\n%s", out.Comments[0].Body)
	}
	if !strings.Contains(out.Comments[1].Body, "now blocking") {
		t.Errorf("escalation comment:\n%s", out.Comments[1].Body)
	}
}
