package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/command"
)

// issueCommentHandler runs `/perf` commands posted on pull requests. Every
// command gets 👀 on receipt and a reply with its outcome, refusals included.
type issueCommentHandler struct{ *base }

func (h *issueCommentHandler) Handles() []string { return []string{"issue_comment"} }

func (h *issueCommentHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev github.IssueCommentEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return fmt.Errorf("parse issue_comment event: %w", err)
	}
	// Edits and deletions never re-run a command: only what was posted.
	if ev.GetAction() != "created" || !ev.GetIssue().IsPullRequest() || h.isBot(ev.GetComment().GetUser()) {
		return nil
	}
	outcome := command.Parse(ev.GetComment().GetBody())
	if outcome.Action == command.Ignore {
		return nil
	}
	installationID := githubapp.GetInstallationIDFromEvent(&ev)
	repo := ev.GetRepo()
	number := ev.GetIssue().GetNumber()
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, number)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	commenter := ev.GetComment().GetUser().GetLogin()
	if _, _, err := client.Reactions.CreateIssueCommentReaction(ctx, owner, name, ev.GetComment().GetID(), "eyes"); err != nil {
		// The reaction is a courtesy; the command still runs.
		log.Warn().Err(err).Msg("react to command comment")
	}
	reply := func(body string) error {
		return h.comment(ctx, client, owner, name, number, "@"+commenter+" "+body)
	}
	if outcome.Action == command.Reply {
		return reply(outcome.Reply)
	}
	cmd := outcome.Command
	log = log.With().Str("command", string(cmd.Kind)).Str("commenter", commenter).Logger()
	ctx = log.WithContext(ctx)
	if cmd.Kind == command.Help {
		return reply(command.HelpText())
	}
	// The comment carries no head SHA: fetch the PR.
	t, _, err := h.fetchPR(ctx, client, installationID, repo, number)
	if err != nil {
		return err
	}
	a, err := h.collaboratorAccess(ctx, client, owner, name, commenter)
	if err != nil {
		return err
	}
	if !allowed(cmd.Permission, a, strings.EqualFold(commenter, t.author)) {
		log.Info().Msg("command refused: insufficient permission")
		return reply(fmt.Sprintf("`%s` needs %s; you have %s access, so nothing was run.", usage(cmd), permissionWords(cmd.Permission), accessWord(a)))
	}
	msg, err := h.run(ctx, client, t, cmd, commenter, ev.GetComment().GetHTMLURL(), deliveryID)
	if err != nil {
		log.Error().Err(err).Msg("command failed")
		if rerr := reply(fmt.Sprintf("`%s` failed: perfgate could not complete it. Try again later; the error was logged.", usage(cmd))); rerr != nil {
			log.Error().Err(rerr).Msg("reply with failure")
		}
		return err
	}
	return reply(msg)
}

// run acts on a permitted command and returns the reply.
func (h *issueCommentHandler) run(ctx context.Context, client *github.Client, t prTarget, cmd command.Command, by, commentURL, deliveryID string) (string, error) {
	switch cmd.Kind {
	case command.Retest:
		tier := Tier(cmd.Tier)
		if _, ok, err := h.loadConfig(ctx, client, t, tier, t.baseRef); !ok {
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("`%s` is invalid on `%s`; see the failing check run.", ConfigPath, t.baseRef), nil
		}
		req := h.runRequest(t, tier, "/perf retest", by, deliveryID)
		req.Confirm = true
		if err := h.queueRun(ctx, client, req); err != nil {
			return "", err
		}
		return fmt.Sprintf("Re-testing `%s` on `%s`.", CheckName(tier), short(t.headSHA)), nil

	case command.Appeal:
		if h.deps.Appeals == nil {
			return "appeals are not enabled on this perfgate server.", nil
		}
		if err := h.deps.Appeals.Open(ctx, Appeal{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, By: by, Reason: cmd.Reason, CommentURL: commentURL}); err != nil {
			return "", fmt.Errorf("open appeal on %s#%d: %w", t.fullName(), t.number, err)
		}
		req := h.runRequest(t, TierQuick, "/perf appeal", by, deliveryID)
		req.Confirm = true
		if err := h.queueRun(ctx, client, req); err != nil {
			return "", err
		}
		return fmt.Sprintf("Appeal recorded:\n\n> %s\n\nRe-testing `%s` on `%s`. A maintainer can then `/perf appeal accept` or `/perf appeal reject [reason]`.",
			cmd.Reason, CheckName(TierQuick), short(t.headSHA)), nil

	case command.AppealAccept, command.AppealReject:
		if h.deps.Appeals == nil {
			return "appeals are not enabled on this perfgate server.", nil
		}
		accept := cmd.Kind == command.AppealAccept
		err := h.deps.Appeals.Decide(ctx, Decision{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, Accept: accept, By: by, Reason: cmd.Reason, CommentURL: commentURL})
		if errors.Is(err, ErrNoOpenAppeal) {
			return "there is no open appeal on this pull request; the author opens one with `/perf appeal <reason>`.", nil
		}
		if err != nil {
			return "", fmt.Errorf("decide appeal on %s#%d: %w", t.fullName(), t.number, err)
		}
		if accept {
			return "Appeal accepted: the regression is recorded as accepted. The baseline does not move without its own review.", nil
		}
		msg := "Appeal rejected."
		if cmd.Reason != "" {
			msg += "\n\n> " + cmd.Reason
		}
		return msg, nil
	}
	zerolog.Ctx(ctx).Warn().Str("kind", string(cmd.Kind)).Msg("command without an action")
	return command.HelpText(), nil
}

func usage(c command.Command) string {
	s := command.Prefix + " " + string(c.Kind)
	if c.Kind == command.Retest && c.Tier != "" {
		s += " " + string(c.Tier)
	}
	return s
}

func permissionWords(p command.Permission) string {
	switch p {
	case command.Write:
		return "write access to the repository"
	case command.Maintain:
		return "the maintain or admin role"
	case command.AuthorOrWrite:
		return "to be the pull request's author or to have write access"
	}
	return "no particular access"
}

func accessWord(a access) string {
	for name, v := range accessNames {
		if v == a {
			return name
		}
	}
	return "no"
}
