package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/rs/zerolog"
)

// pullRequestHandler runs the quick tier when a PR's code changes, the
// merge tier when the configured label is added, and stops a closed PR's
// work.
type pullRequestHandler struct{ *base }

func (h *pullRequestHandler) Handles() []string { return []string{"pull_request"} }

// maxListedFiles is GitHub's cap on the PR files endpoint; a PR this large
// may hide matching files, so it is gated regardless (fail safe).
const maxListedFiles = 3000

func (h *pullRequestHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev pullRequestEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	action := ev.Action
	switch action {
	case "opened", "synchronize", "reopened", "ready_for_review", "labeled", "closed":
	default:
		return nil
	}
	installationID := ev.installationID()
	ctx, log := githubapp.PreparePRContext(ctx, installationID, ev.Repository.github(), ev.PullRequest.Number)
	t := targetOf(installationID, ev.Repository.github(), ev.PullRequest.github())
	log.Debug().Str("action", action).Str("sha", t.headSHA).Msg("pull request event")
	if action == "closed" {
		// Merged or not, nothing more runs for it; reopening measures again.
		if err := h.deps.Dispatcher.Close(ctx, t.fullName(), t.number, ev.Sender.Login); err != nil {
			return fmt.Errorf("close %s#%d: %w", t.fullName(), t.number, err)
		}
		return nil
	}
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	if action == "labeled" {
		return h.labeled(ctx, client, t, ev.Label.Name, ev.Sender.Login, deliveryID)
	}
	if action == "synchronize" {
		// Older heads' pending runs are moot; cancel them before queueing.
		if err := h.deps.Dispatcher.Supersede(ctx, t.fullName(), t.number, t.headSHA); err != nil {
			return fmt.Errorf("supersede runs of %s#%d: %w", t.fullName(), t.number, err)
		}
	}
	cfg, state, err := h.loadConfig(ctx, client, t, check.TierQuick, deliveryID)
	if state != configOK {
		return err
	}
	return h.quickRun(ctx, client, t, cfg, "pull_request."+action, ev.Sender.Login, deliveryID)
}

// labeled runs the merge tier when the configured label is added. On a
// fork's PR the label is the labeler's approval of the commit they saw,
// when triggers.forks lets them approve.
func (h *pullRequestHandler) labeled(ctx context.Context, client *github.Client, t prTarget, label, by, deliveryID string) error {
	cfg, state, err := h.loadConfig(ctx, client, t, check.TierMerge, deliveryID)
	if state != configOK {
		return err
	}
	if cfg.MergeLabel == "" || !strings.EqualFold(label, cfg.MergeLabel) {
		return nil
	}
	a := accessNone
	if t.fork {
		if a, err = h.collaboratorAccess(ctx, client, t.owner, t.repo, by); err != nil {
			return err
		}
	}
	return h.mergeRun(ctx, t, cfg, "label:"+label, by, a, deliveryID)
}

// changesGatedFile lists the PR's files page by page and stops at the first
// one (or a renamed file's old name) the paths gate. capped reports that
// GitHub's 3000-file limit was reached without a match: the PR is gated
// anyway, since the files it hides may match.
func changesGatedFile(ctx context.Context, client *github.Client, t prTarget, cfg RepoConfig) (matched, capped bool, err error) {
	opts := &github.ListOptions{PerPage: 100}
	listed := 0
	for {
		page, resp, err := client.PullRequests.ListFiles(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return false, false, fmt.Errorf("list files of %s#%d page %d: %w", t.fullName(), t.number, opts.Page, err)
		}
		for _, f := range page {
			if gates(cfg, f) {
				zerolog.Ctx(ctx).Debug().Int("files_listed", listed+len(page)).Str("file", f.GetFilename()).Msg("gated file changed")
				return true, false, nil
			}
		}
		listed += len(page)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return false, listed >= maxListedFiles, nil
}
