package drift_test

import (
	"context"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

// TestRegressedSeesTheIssue: the hook the server starts bisects from is
// called with the event's leader only — one bisect per step, not one per
// metric and cell — after its issue is open, and never with an
// improvement.
func TestRegressedSeesTheIssue(t *testing.T) {
	ctx := context.Background()
	st, _ := seeded(t, 30, 20)
	gh := ghtest.New(t)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	var got []store.ChangePointRecord
	pass := drift.New(drift.Options{Store: st, Clients: cc, Links: links{}, Log: zerolog.Nop(),
		Regressed: func(_ context.Context, rec store.ChangePointRecord) error { got = append(got, rec); return nil }})
	if sum, err := pass.Run(ctx); err != nil || len(sum.Errors) > 0 {
		t.Fatalf("pass: %+v, %v", sum, err)
	}
	issues := gh.Issues()
	if len(got) != 1 || len(issues) != 1 {
		t.Fatalf("hook calls %d, issues %d; want one of each", len(got), len(issues))
	}
	for _, rec := range got {
		if !rec.Regression || rec.ID == 0 || rec.IssueNumber != issues[0].Number || rec.GoodSHA == "" || rec.BadSHA == "" {
			t.Errorf("hook got %+v, want a stored regression with issue #%d and its commits", rec, issues[0].Number)
		}
	}
}
