package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// pullRequestHandler runs the quick tier when a PR's code changes, and the
// merge tier when the configured label is added.
type pullRequestHandler struct{ *base }

func (h *pullRequestHandler) Handles() []string { return []string{"pull_request"} }

// maxListedFiles is GitHub's cap on the PR files endpoint; a PR this large
// may hide matching files, so it is gated regardless (fail safe).
const maxListedFiles = 3000

func (h *pullRequestHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev github.PullRequestEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return fmt.Errorf("parse pull_request event: %w", err)
	}
	action := ev.GetAction()
	switch action {
	case "opened", "synchronize", "reopened", "ready_for_review", "labeled":
	default:
		return nil
	}
	installationID := githubapp.GetInstallationIDFromEvent(&ev)
	ctx, log := githubapp.PreparePRContext(ctx, installationID, ev.GetRepo(), ev.GetPullRequest().GetNumber())
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	t := targetOf(installationID, ev.GetRepo(), ev.GetPullRequest())
	log.Debug().Str("action", action).Str("sha", t.headSHA).Msg("pull request event")

	if action == "labeled" {
		return h.labeled(ctx, client, t, ev.GetLabel().GetName(), ev.GetSender().GetLogin(), deliveryID)
	}
	if action == "synchronize" {
		// Older heads' pending runs are moot; cancel them before queueing.
		if err := h.deps.Dispatcher.Supersede(ctx, t.fullName(), t.number, t.headSHA); err != nil {
			return fmt.Errorf("supersede runs of %s#%d: %w", t.fullName(), t.number, err)
		}
	}
	cfg, ok, err := h.loadConfig(ctx, client, t, TierQuick, t.baseRef)
	if !ok {
		return err
	}
	if t.draft && cfg.Drafts == DraftsSkip {
		_, err := h.checks.Conclude(ctx, client, t.owner, t.repo, TierQuick, t.headSHA, t.number, VerdictSkipped,
			Output{Title: "Draft pull request", Summary: "perfgate runs when the pull request is marked ready for review."})
		return err
	}
	files, capped, err := listFiles(ctx, client, t)
	if err != nil {
		return err
	}
	if !capped && !matchesAny(cfg.Paths, files) {
		if cfg.NoCheckWhenUnmatched {
			log.Info().Msg("no gated paths changed; no check posted")
			return nil
		}
		_, err := h.checks.Conclude(ctx, client, t.owner, t.repo, TierQuick, t.headSHA, t.number, VerdictSkipped,
			Output{Title: "No gated changes", Summary: "no " + strings.Join(cfg.Paths, " or ") + " changes"})
		return err
	}
	if capped {
		log.Info().Int("files", len(files)).Msg("PR lists the maximum number of files; gating it")
	}
	if t.fork && cfg.Forks == ForksWait {
		_, err := h.checks.Conclude(ctx, client, t.owner, t.repo, TierQuick, t.headSHA, t.number, VerdictWaiting,
			Output{Title: "Waiting for a maintainer", Summary: "This pull request comes from a fork. perfgate does not run fork code on its runners until a maintainer comments `/perf retest`."})
		return err
	}
	return h.queueRun(ctx, client, h.runRequest(t, TierQuick, "pull_request."+action, ev.GetSender().GetLogin(), deliveryID))
}

// labeled runs the merge tier when the configured label is added.
func (h *pullRequestHandler) labeled(ctx context.Context, client *github.Client, t prTarget, label, by, deliveryID string) error {
	cfg, ok, err := h.loadConfig(ctx, client, t, TierMerge, t.baseRef)
	if !ok {
		return err
	}
	if cfg.MergeLabel == "" || !strings.EqualFold(label, cfg.MergeLabel) {
		return nil
	}
	// Adding a label needs triage access, so the labeler has vouched for
	// fork code too.
	return h.queueRun(ctx, client, h.runRequest(t, TierMerge, "label:"+label, by, deliveryID))
}

// listFiles lists all of a PR's files, following every page. capped reports
// that GitHub's 3000-file limit was reached.
func listFiles(ctx context.Context, client *github.Client, t prTarget) ([]*github.CommitFile, bool, error) {
	var all []*github.CommitFile
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := client.PullRequests.ListFiles(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return nil, false, fmt.Errorf("list files of %s#%d page %d: %w", t.fullName(), t.number, opts.Page, err)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	zerolog.Ctx(ctx).Debug().Int("files", len(all)).Msg("listed PR files")
	return all, len(all) >= maxListedFiles, nil
}
