package app

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
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
	var ev mergeGroupEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	if ev.Action != "checks_requested" {
		return nil
	}
	mg := ev.MergeGroup
	installationID := ev.installationID()
	pr := 0
	if m := queuePR.FindStringSubmatch(mg.HeadRef); m != nil {
		pr, _ = strconv.Atoi(m[1])
	}
	ctx, _ = githubapp.PreparePRContext(ctx, installationID, ev.Repository.github(), pr)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	repo := ev.Repository
	t := prTarget{
		installationID: installationID, owner: repo.Owner.Login, repo: repo.Name, number: pr,
		headSHA: mg.HeadSHA, baseSHA: mg.BaseSHA, baseRef: mg.BaseRef, defaultBranch: repo.DefaultBranch,
	}
	cfg, state, err := h.loadConfig(ctx, client, t, check.TierMerge, deliveryID)
	if state != configOK {
		return err
	}
	// The merge group's head is a commit GitHub made in this repository,
	// but it holds the queued pull request's code: a fork's code runs only
	// as the fork policy lets it run anywhere — never under `forks:
	// never`, and otherwise only when the pull request's head was approved.
	if msg, ok, err := h.groupRuns(ctx, client, t, cfg); err != nil {
		return err
	} else if !ok {
		return h.conclude(ctx, t, check.TierMerge, msg.verdict, msg.out, deliveryID)
	}
	return h.queueRun(ctx, h.runRequest(t, cfg, check.TierMerge, "merge_group", ev.Sender.Login, deliveryID))
}

type groupRefusal struct {
	verdict check.Phase
	out     check.Output
}

// groupRuns decides whether a merge group may run under the fork policy,
// by the pull request its ref names (GitHub's
// gh-readonly-queue/<base>/pr-<n>-<sha>). A group whose pull request
// cannot be told runs nothing: it may hold a fork's code.
func (h *mergeGroupHandler) groupRuns(ctx context.Context, client *github.Client, t prTarget, cfg RepoConfig) (groupRefusal, bool, error) {
	if t.number == 0 {
		return groupRefusal{check.Waiting, check.Output{Title: "Pull request not known",
			Summary: "perfgate could not tell which pull request this merge group holds (its ref names none), so it did not run the group's code: it may be a fork's. Re-queue the pull request."}}, false, nil
	}
	repo := &github.Repository{Owner: &github.User{Login: &t.owner}, Name: &t.repo, FullName: github.String(t.fullName())}
	pr, _, err := h.fetchPR(ctx, client, t.installationID, repo, t.number)
	if err != nil {
		return groupRefusal{}, false, err
	}
	if !pr.fork {
		return groupRefusal{}, true, nil
	}
	st, err := h.forkStateOf(ctx, pr, cfg)
	if err != nil {
		return groupRefusal{}, false, err
	}
	switch st {
	case forkNever:
		return groupRefusal{check.Skipped, check.Output{Title: "Fork pull requests do not run here",
			Summary: fmt.Sprintf("This merge group holds #%d, which comes from a fork, and this repository's `%s` (on `%s`) says `triggers.forks: never`: "+
				"perfgate never runs a fork's code on its GPU runners, in a merge group either, so the group was not measured.", t.number, repoconfig.Path, cfg.Ref)}}, false, nil
	case forkWaits:
		return groupRefusal{check.Waiting, check.Output{Title: "Waiting for approval",
			Summary: fmt.Sprintf("This merge group holds #%d, which comes from a fork, and nobody has approved running its head commit `%s`, so perfgate did not run the group. "+
				"After reviewing it, %s can comment `/perf approve %s` on the pull request, then re-queue it.", t.number, pr.headSHA, approverWords(cfg.Forks), pr.headSHA)}}, false, nil
	}
	return groupRefusal{}, true, nil
}
