package app

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// mergeGroupHandler runs the merge tier for GitHub's merge queue. The queue
// waits for required checks on merge_group.head_sha, so perfgate always
// reports there.
type mergeGroupHandler struct{ *base }

func (h *mergeGroupHandler) Handles() []string { return []string{"merge_group"} }

// queuePR finds the PR number in a merge queue ref such as
// refs/heads/gh-readonly-queue/main/pr-17-<sha>.
var queuePR = regexp.MustCompile(`/pr-(\d+)-[0-9a-f]+$`)

func (h *mergeGroupHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev github.MergeGroupEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.GetAction() != "checks_requested" {
		return nil
	}
	mg := ev.GetMergeGroup()
	installationID := githubapp.GetInstallationIDFromEvent(&ev)
	pr := 0
	if m := queuePR.FindStringSubmatch(mg.GetHeadRef()); m != nil {
		pr, _ = strconv.Atoi(m[1])
	}
	ctx, _ = githubapp.PreparePRContext(ctx, installationID, ev.GetRepo(), pr)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	repo := ev.GetRepo()
	t := prTarget{
		installationID: installationID, owner: repo.GetOwner().GetLogin(), repo: repo.GetName(), number: pr,
		headSHA: mg.GetHeadSHA(), baseSHA: mg.GetBaseSHA(), baseRef: mg.GetBaseRef(), defaultBranch: repo.GetDefaultBranch(),
	}
	// The merge group's head is a commit of this repository (GitHub made
	// it from the queue), never a fork's: it runs without an approval.
	cfg, state, err := h.loadConfig(ctx, client, t, TierMerge, deliveryID)
	if state != configOK {
		return err
	}
	return h.queueRun(ctx, h.runRequest(t, cfg, TierMerge, "merge_group", ev.GetSender().GetLogin(), deliveryID))
}
