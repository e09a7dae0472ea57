package app

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// checkRunHandler re-runs a check when GitHub's "Re-run" or perfgate's own
// Retest button is pressed, and explains how to appeal when Appeal is.
// Every press gets an answer: a refused one too.
type checkRunHandler struct{ *base }

func (h *checkRunHandler) Handles() []string { return []string{"check_run"} }

func (h *checkRunHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev github.CheckRunEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	action := ev.GetAction()
	if action != "rerequested" && action != "requested_action" {
		return nil
	}
	run := ev.GetCheckRun()
	// Both actions go only to the app that owns the run; check anyway.
	if id := run.GetApp().GetID(); id != 0 && id != h.appID {
		return nil
	}
	tier, ok := TierFromCheckName(run.GetName())
	if !ok {
		return nil
	}
	pr := prNumberOf(run)
	installationID := githubapp.GetInstallationIDFromEvent(&ev)
	ctx, log := githubapp.PreparePRContext(ctx, installationID, ev.GetRepo(), pr)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	repo := ev.GetRepo()
	sender := ev.GetSender().GetLogin()
	t := prTarget{installationID: installationID, owner: repo.GetOwner().GetLogin(), repo: repo.GetName(), number: pr, headSHA: run.GetHeadSHA()}
	if pr > 0 {
		fetched, _, err := h.fetchPR(ctx, client, installationID, repo, pr)
		if err != nil {
			return err
		}
		fetched.headSHA = run.GetHeadSHA() // re-run what was run, even if the PR moved on
		t = fetched
	}
	answer := func(body string) error {
		if pr == 0 {
			// A merge-queue run has no pull request to answer on.
			log.Info().Str("sender", sender).Str("answer", body).Msg("check run action on a run without a pull request")
			return nil
		}
		return h.comment(ctx, installationID, t.owner, t.repo, pr, "@"+sender+" "+body, "reply:"+deliveryID)
	}
	trigger := "check_run.rerequested"
	if action == "requested_action" {
		switch ev.GetRequestedAction().Identifier {
		case "retest":
			trigger = "check_run.retest"
			// Buttons are shown to anyone who can see the check; gate them
			// like `/perf retest`.
			a, err := h.collaboratorAccess(ctx, client, t.owner, t.repo, sender)
			if err != nil {
				return err
			}
			if a < accessWrite {
				log.Info().Str("sender", sender).Msg("retest button by a non-writer refused")
				return answer(fmt.Sprintf("the Retest button on `%s` needs write access to the repository; you have %s access, so nothing was run. A maintainer can comment `/perf retest`.", run.GetName(), accessWord(a)))
			}
		case "appeal":
			return answer(fmt.Sprintf("to appeal `%s` on `%s`, comment `/perf appeal <reason>` on this pull request; the reason is recorded and the PR re-tested.", run.GetName(), short(t.headSHA)))
		default:
			return answer(fmt.Sprintf("perfgate has no button %q; nothing was run.", ev.GetRequestedAction().Identifier))
		}
	}
	_, state, err := h.loadConfig(ctx, client, t, tier, t.baseRef, deliveryID)
	switch {
	case err != nil:
		return err
	case state == configInvalid:
		return answer(fmt.Sprintf("`%s` is invalid on `%s`, so nothing was run; see the failing check run.", ConfigPath, t.baseRef))
	case state == configMissing:
		return answer(fmt.Sprintf("this repository has no `%s`, so perfgate does not gate it and nothing was run: %s", ConfigPath, DocsURL))
	}
	req := h.runRequest(t, tier, trigger, sender, deliveryID)
	req.Confirm = true
	return h.queueRun(ctx, req)
}

// prNumberOf reads the PR from external_id (set by perfgate, present for
// forks) or else from the run's pull_requests.
func prNumberOf(run *github.CheckRun) int {
	if n, ok := prFromExternalID(run.GetExternalID()); ok {
		return n
	}
	if len(run.PullRequests) > 0 {
		return run.PullRequests[0].GetNumber()
	}
	return 0
}
