package app

import (
	"context"
	"fmt"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/rs/zerolog"
)

// checkSuiteHandler answers GitHub's "Re-run all checks": the suite's PR is
// measured again on the suite's head SHA, quick tier, as a retest would.
type checkSuiteHandler struct{ *base }

func (h *checkSuiteHandler) Handles() []string { return []string{"check_suite"} }

func (h *checkSuiteHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev checkSuiteEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	suite := ev.CheckSuite
	if ev.Action != "rerequested" || len(suite.PullRequests) == 0 {
		return nil
	}
	// Only perfgate's own suite; GitHub sends rerequests to the owning app.
	if id := suite.App.ID; id != 0 && id != h.appID {
		return nil
	}
	installationID := ev.installationID()
	repo := ev.Repository.github()
	number := suite.PullRequests[0].Number
	ctx, _ = githubapp.PreparePRContext(ctx, installationID, repo, number)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	t, _, err := h.fetchPR(ctx, client, installationID, repo, number)
	if err != nil {
		return err
	}
	t.headSHA = suite.HeadSHA // re-run what was run, even if the PR moved on
	cfg, state, err := h.loadConfig(ctx, client, t, check.TierQuick, deliveryID)
	if state != configOK {
		return err
	}
	if st, err := h.forkStateOf(ctx, t, cfg); err != nil || st != forkRuns {
		// A fork's commit nobody approved: its check already says so.
		zerolog.Ctx(ctx).Info().Str("sha", t.headSHA).Msg("re-run of a fork commit nobody approved: nothing run")
		return err
	}
	req := h.runRequest(t, cfg, check.TierQuick, "check_suite.rerequested", ev.Sender.Login, deliveryID)
	req.Confirm = true
	return h.queueRun(ctx, req)
}
