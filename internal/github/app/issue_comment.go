package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/command"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// issueCommentHandler runs `/perf` commands posted on pull requests. Every
// command gets 👀 on receipt and a reply with its outcome, refusals included.
type issueCommentHandler struct{ *base }

func (h *issueCommentHandler) Handles() []string { return []string{"issue_comment"} }

func (h *issueCommentHandler) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var ev issueCommentEvent
	if err := parse(eventType, payload, &ev); err != nil {
		return err
	}
	// Edits and deletions never re-run a command: only what was posted.
	// On an issue only the commands that need no pull request run (bisect.go).
	if ev.Action != "created" || h.isBot(ev.Comment.User) {
		return nil
	}
	onPR := ev.Issue.PullRequest != nil
	outcome := command.Parse(ev.Comment.Body)
	if outcome.Action == command.Ignore {
		return nil
	}
	installationID := ev.installationID()
	repo := ev.Repository.github()
	number := ev.Issue.Number
	ctx, log := githubapp.PreparePRContext(ctx, installationID, repo, number)
	client, err := h.clients.NewInstallationClient(installationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", installationID, err)
	}
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	commenter := ev.Comment.User.Login
	commentID := ev.Comment.ID
	if err := h.deps.Outbox.React(ctx, request.Reaction{Key: fmt.Sprintf("eyes:%s:%d", repo.GetFullName(), commentID), InstallationID: installationID,
		Owner: owner, Repo: name, CommentID: commentID, Content: "eyes"}); err != nil {
		return fmt.Errorf("react to command comment: %w", err)
	}
	// One reply per delivery: a retried delivery does not answer twice.
	reply := func(body string) error {
		return h.comment(ctx, installationID, owner, name, number, "@"+commenter+" "+body, "reply:"+deliveryID)
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
	if !onPR && !worksWithoutPR(cmd.Kind) {
		return reply(fmt.Sprintf("`%s` acts on a pull request, so nothing was run here: comment it on the pull request.", usage(cmd)))
	}
	if cmd.Kind == command.Bisect {
		return h.bisect(ctx, client, installationID, owner, name, number, cmd, commenter, deliveryID, reply)
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
	msg, err := h.run(ctx, client, t, cmd, commenter, a, ev.Comment.HTMLURL, ev.Comment.CreatedAt.Time, deliveryID)
	if err != nil {
		// The delivery is retried (a GitHub or store hiccup); the reply
		// comes with the attempt that succeeds. One that cannot succeed
		// still gets an answer.
		log.Error().Err(err).Msg("command failed")
		if backoff.IsPermanent(err) {
			if rerr := reply(fmt.Sprintf("`%s` failed: perfgate could not complete it (%v).", usage(cmd), err)); rerr != nil {
				log.Error().Err(rerr).Msg("reply with failure")
			}
		}
		return err
	}
	return reply(msg)
}

// run acts on a permitted command and returns the reply.
func (h *issueCommentHandler) run(ctx context.Context, client *github.Client, t prTarget, cmd command.Command, by string, a access, commentURL string, commentedAt time.Time, deliveryID string) (string, error) {
	switch cmd.Kind {
	case command.Retest:
		tier := check.Tier(cmd.Tier)
		cfg, msg, ok, err := h.runnable(ctx, client, t, tier, deliveryID)
		if !ok {
			return msg, err
		}
		req := h.runRequest(t, cfg, tier, "/perf retest", by, deliveryID)
		req.Confirm = true
		if err := h.queueRun(ctx, req); err != nil {
			return "", err
		}
		return fmt.Sprintf("Re-testing `%s` on `%s`.", check.CheckName(tier), rev.Short(t.headSHA)), nil

	case command.Approve:
		return h.approveCommand(ctx, client, t, cmd, by, a, commentedAt, deliveryID)

	case command.Profile:
		return h.profileCommand(ctx, client, t, by, deliveryID)

	case command.Capacity, command.Soak:
		return h.longRunCommand(ctx, client, t, check.Tier(cmd.Kind), by, deliveryID)

	case command.RootCause:
		return h.rootCauseCommand(ctx, t, cmd, by, prURLOf(commentURL))

	case command.Ack:
		if h.deps.Acks == nil {
			return "acknowledgements are not enabled on this perfgate server.", nil
		}
		tiers, err := h.deps.Acks.Ack(ctx, request.Ack{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, By: by, Reason: cmd.Reason, CommentURL: commentURL})
		if err != nil {
			return "", fmt.Errorf("acknowledge on %s#%d: %w", t.fullName(), t.number, err)
		}
		if len(tiers) == 0 {
			return "no check of this pull request waits for an acknowledgement (only an inconclusive result on a tier with `inconclusive: needs_ack` does), so nothing changed.", nil
		}
		names := make([]string, len(tiers))
		for i, tier := range tiers {
			names[i] = "`" + check.CheckName(tier) + "`"
		}
		return fmt.Sprintf("Acknowledged: %s passes as inconclusive; recorded in the audit log. A retest can still decide it.", strings.Join(names, ", ")), nil

	case command.Appeal:
		if h.deps.Appeals == nil {
			return "appeals are not enabled on this perfgate server.", nil
		}
		cfg, msg, ok, err := h.runnable(ctx, client, t, check.TierQuick, deliveryID)
		if !ok {
			return msg, err
		}
		if err := h.deps.Appeals.Open(ctx, request.Appeal{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, By: by, Reason: cmd.Reason, CommentURL: commentURL}); err != nil {
			return "", fmt.Errorf("open appeal on %s#%d: %w", t.fullName(), t.number, err)
		}
		req := h.runRequest(t, cfg, check.TierQuick, "/perf appeal", by, deliveryID)
		req.Confirm = true
		if err := h.queueRun(ctx, req); err != nil {
			return "", err
		}
		return fmt.Sprintf("Appeal recorded:\n\n> %s\n\nRe-testing `%s` on `%s`. A maintainer can then `/perf appeal accept` or `/perf appeal reject [reason]`.",
			cmd.Reason, check.CheckName(check.TierQuick), rev.Short(t.headSHA)), nil

	case command.AppealAccept, command.AppealReject:
		if h.deps.Appeals == nil {
			return "appeals are not enabled on this perfgate server.", nil
		}
		accept := cmd.Kind == command.AppealAccept
		err := h.deps.Appeals.Decide(ctx, request.Decision{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, Accept: accept, By: by, Reason: cmd.Reason, CommentURL: commentURL})
		if errors.Is(err, request.ErrNoOpenAppeal) {
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

// approveCommand approves the commit the maintainer names to run on
// perfgate's runners, and starts its quick check.
func (h *issueCommentHandler) approveCommand(ctx context.Context, client *github.Client, t prTarget, cmd command.Command, by string, a access, commentedAt time.Time, deliveryID string) (string, error) {
	cfg, msg, ok, err := h.configured(ctx, client, t, check.TierQuick, deliveryID)
	if !ok {
		return msg, err
	}
	// Bound to the commit the approver names: if the PR moved on, what
	// they reviewed is not what would run.
	// t.headSHA is GitHub's answer now, not a webhook's. A prefix is
	// checked against the heads perfgate recorded and the commits
	// GitHub lists for the PR.
	var seen []request.SeenHead
	var gh *prHistory
	hist, known := h.deps.Approvals.(HeadHistory)
	if known && len(cmd.SHA) < len(t.headSHA) && strings.HasPrefix(t.headSHA, strings.ToLower(cmd.SHA)) {
		if seen, err = hist.Heads(ctx, t.fullName(), t.number); err != nil {
			return "", fmt.Errorf("heads of %s#%d: %w", t.fullName(), t.number, err)
		}
		hs, err := history(ctx, client, t)
		if err != nil {
			return "", err
		}
		gh = &hs
	}
	if refusal, ok := approvedHead(cmd.SHA, t.headSHA, seen, gh, known, commentedAt); !ok {
		zerolog.Ctx(ctx).Info().Str("named", cmd.SHA).Str("head_sha", t.headSHA).Msg("approval by prefix refused")
		return refusal, nil
	}
	refusal, ok, err := h.approve(ctx, t, cfg, by, a, "/perf approve")
	if !ok {
		return refusal, err
	}
	if err := h.quickRun(ctx, client, t, cfg, "/perf approve", by, deliveryID); err != nil {
		return "", err
	}
	return fmt.Sprintf("Approved commit `%s` to run on perfgate's runners; the `%s` check follows (`/perf retest merge` runs the merge tier). A new push needs a new approval.",
		rev.Short(t.headSHA), check.CheckName(check.TierQuick)), nil

}

// runnable loads the config for a command that runs the PR's code (a
// measurement, a profile) and checks the commit may run under the fork
// policy; when either says no it returns the reply that says why.
func (h *issueCommentHandler) runnable(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, deliveryID string) (RepoConfig, string, bool, error) {
	cfg, msg, ok, err := h.configured(ctx, client, t, tier, deliveryID)
	if !ok {
		return cfg, msg, false, err
	}
	st, err := h.forkStateOf(ctx, t, cfg)
	if err != nil {
		return cfg, "", false, err
	}
	if st != forkRuns {
		return cfg, notApprovedReply(t, st, cfg), false, nil
	}
	return cfg, "", true, nil
}

// configured loads the config for a command that runs the benchmark; when
// the config is broken or missing it returns the reply that says so.
func (h *issueCommentHandler) configured(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, deliveryID string) (RepoConfig, string, bool, error) {
	cfg, state, err := h.loadConfig(ctx, client, t, tier, deliveryID)
	switch {
	case err != nil:
		return cfg, "", false, err
	case state == configInvalid:
		return cfg, fmt.Sprintf("`%s` is invalid, so nothing was run; see the failing check run.", repoconfig.Path), false, nil
	case state == configMissing:
		return cfg, fmt.Sprintf("this repository has no `%s`, so perfgate does not gate it and nothing was run. Add the file (an empty one uses the defaults): %s", repoconfig.Path, check.DocsURL), false, nil
	}
	return cfg, "", true, nil
}

func usage(c command.Command) string {
	s := command.Prefix + " " + string(c.Kind)
	if c.Kind == command.Retest && c.Tier != "" {
		s += " " + string(c.Tier)
	}
	if c.Kind == command.Approve {
		s += " " + c.SHA
	}
	if c.Kind == command.Bisect {
		s += " " + c.Good + " " + c.Bad
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
