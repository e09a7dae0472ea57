package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// pullRequestReviewHandler runs the merge tier on an approving review.
type pullRequestReviewHandler struct{ *base }

func (h *pullRequestReviewHandler) Handles() []string { return []string{"pull_request_review"} }

func (h *pullRequestReviewHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev pullRequestReviewEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "submitted" || !strings.EqualFold(ev.Review.State, "approved") {
		return nil
	}
	installationID := ev.installationID()
	ctx, log := githubapp.PreparePRContext(ctx, installationID, ev.Repository.github(), ev.PullRequest.Number)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	t := targetOf(installationID, ev.Repository.github(), ev.PullRequest.github())
	// Anyone may leave an approving review on a public repo; only a
	// writer's approval spends merge-tier runner time.
	reviewer := ev.Review.User.Login
	a, err := h.collaboratorAccess(ctx, client, t.owner, t.repo, reviewer)
	if err != nil {
		return err
	}
	if a < accessWrite {
		log.Info().Str("reviewer", reviewer).Msg("approval by a non-writer; merge tier not run")
		return nil
	}
	cfg, state, err := h.loadConfig(ctx, client, t, check.TierMerge, deliveryID)
	if state != configOK {
		return err
	}
	if !cfg.MergeOnApproval {
		return nil
	}
	// A review may approve an older commit; the gate runs on what it saw,
	// and on a fork's PR the review approves running that commit when
	// triggers.forks lets the reviewer approve.
	if sha := ev.Review.CommitID; sha != "" {
		t.headSHA = sha
	}
	return h.mergeRun(ctx, t, cfg, "pull_request_review.approved", reviewer, a, deliveryID)
}
