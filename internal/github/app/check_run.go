package app

import (
	"context"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// checkRunHandler re-runs a check when GitHub's "Re-run" or perfgate's own
// Retest button is pressed, and explains how to appeal when Appeal is.
// Every press gets an answer: a refused one too.
type checkRunHandler struct{ *base }

func (h *checkRunHandler) Handles() []string { return []string{"check_run"} }

func (h *checkRunHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev checkRunEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	action := ev.Action
	if action != "rerequested" && action != "requested_action" {
		return nil
	}
	run := ev.CheckRun
	// Both actions go only to the app that owns the run; check anyway.
	if id := run.App.ID; id != 0 && id != h.appID {
		return nil
	}
	tier, ok := check.TierFromCheckName(run.Name)
	if !ok {
		return nil
	}
	pr := prNumberOf(run)
	installationID := ev.installationID()
	repo := ev.Repository.github()
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, pr)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	sender := ev.Sender.Login
	t := prTarget{installationID: installationID, owner: ev.Repository.Owner.Login, repo: ev.Repository.Name, number: pr, headSHA: run.HeadSHA,
		defaultBranch: ev.Repository.DefaultBranch}
	prHead := ""
	if pr > 0 {
		fetched, _, err := h.fetchPR(ctx, client, installationID, repo, pr)
		if err != nil {
			return err
		}
		prHead = fetched.headSHA
		fetched.headSHA = run.HeadSHA // re-run what was run, even if the PR moved on
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
		switch ev.RequestedAction.Identifier {
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
				return answer(fmt.Sprintf("the Retest button on `%s` needs write access to the repository; you have %s access, so nothing was run. A maintainer can comment `/perf retest`.", run.Name, accessWord(a)))
			}
		case "appeal":
			return answer(fmt.Sprintf("to appeal `%s` on `%s`, comment `/perf appeal <reason>` on this pull request; the reason is recorded and the PR re-tested.", run.Name, rev.Short(t.headSHA)))
		case "approve":
			return h.approveButton(ctx, client, t, tier, prHead, sender, deliveryID, answer)
		default:
			return answer(fmt.Sprintf("perfgate has no button %q; nothing was run.", ev.RequestedAction.Identifier))
		}
	}
	if tier.LongRun() {
		// A long-run tier holds a card for tens of minutes to hours: its
		// re-run is the maintainers', as `/perf capacity` and `/perf soak`.
		a, err := h.collaboratorAccess(ctx, client, t.owner, t.repo, sender)
		if err != nil {
			return err
		}
		if a < accessMaintain {
			log.Info().Str("sender", sender).Str("tier", string(tier)).Msg("long-run re-run by a non-maintainer refused")
			return answer(fmt.Sprintf("re-running `%s` needs the maintain or admin role (as `/perf %s`); you have %s access, so nothing was run.", run.Name, tier, accessWord(a)))
		}
	}
	cfg, ok, err := h.buttonConfig(ctx, client, t, tier, deliveryID, answer)
	if !ok {
		return err
	}
	if st, err := h.forkStateOf(ctx, t, cfg); err != nil {
		return err
	} else if st != forkRuns {
		return answer(notApprovedReply(t, st, cfg))
	}
	req := h.runRequest(t, cfg, tier, trigger, sender, deliveryID)
	req.Confirm = true
	return h.queueRun(ctx, req)
}

// buttonConfig loads the config for a button press; a broken or missing
// one is answered (ok false, no error).
func (h *checkRunHandler) buttonConfig(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, deliveryID string, answer func(string) error) (RepoConfig, bool, error) {
	cfg, state, err := h.loadConfig(ctx, client, t, tier, deliveryID)
	switch {
	case err != nil:
		return cfg, false, err
	case state == configInvalid:
		return cfg, false, answer(fmt.Sprintf("`%s` is invalid, so nothing was run; see the failing check run.", repoconfig.Path))
	case state == configMissing:
		return cfg, false, answer(fmt.Sprintf("this repository has no `%s`, so perfgate does not gate it and nothing was run: %s", repoconfig.Path, check.DocsURL))
	}
	return cfg, true, nil
}

// approveButton is "Approve" on a fork commit's waiting check: it approves
// exactly the commit that check is about, and runs its tier.
func (h *checkRunHandler) approveButton(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, prHead, sender, deliveryID string, answer func(string) error) error {
	if t.number == 0 {
		return answer("only a pull request's commit can be approved; nothing was run.")
	}
	if prHead != t.headSHA {
		return answer(fmt.Sprintf("this check is about `%s`, but the pull request has moved on to `%s`; nothing was approved or run. Approve the new commit on its own check, or comment `/perf approve %s`.",
			rev.Short(t.headSHA), rev.Short(prHead), prHead))
	}
	cfg, ok, err := h.buttonConfig(ctx, client, t, tier, deliveryID, answer)
	if !ok {
		return err
	}
	a, err := h.collaboratorAccess(ctx, client, t.owner, t.repo, sender)
	if err != nil {
		return err
	}
	refusal, ok, err := h.approve(ctx, t, cfg, sender, a, "Approve button")
	if !ok {
		if err != nil {
			return err
		}
		return answer(refusal)
	}
	if tier == check.TierQuick {
		err = h.quickRun(ctx, client, t, cfg, "check_run.approve", sender, deliveryID)
	} else {
		err = h.mergeRun(ctx, t, cfg, "check_run.approve", sender, a, deliveryID)
	}
	if err != nil {
		return err
	}
	return answer(fmt.Sprintf("approved commit `%s` to run on perfgate's runners; the `%s` check follows. A new push needs a new approval.", rev.Short(t.headSHA), check.CheckName(tier)))
}

// prNumberOf reads the PR from external_id (set by perfgate, present for
// forks) or else from the run's pull_requests.
func prNumberOf(run hookCheckRun) int {
	if n, ok := prFromExternalID(run.ExternalID); ok {
		return n
	}
	if len(run.PullRequests) > 0 {
		return run.PullRequests[0].Number
	}
	return 0
}
