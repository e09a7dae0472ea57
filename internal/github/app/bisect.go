package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/command"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Bisects starts the bisects maintainers ask for with `/perf bisect`
// (internal/github/bisectjob runs them on the job queue).
type Bisects interface {
	// StartBisect resolves the two commits, lists the commits between
	// them and queues the first measurement. A range that cannot be
	// bisected as asked (an unknown commit, a good commit that is not an
	// ancestor of the bad one, too many commits, a bisect of it already
	// running, no perfgate config) is a *BisectRefusal saying why; any
	// other error is worth retrying.
	StartBisect(ctx context.Context, r request.Bisect) (request.BisectStarted, error)
}

// worksWithoutPR says which commands run on an issue as well as on a pull
// request: those that name their own commits.
func worksWithoutPR(k command.Kind) bool { return k == command.Bisect || k == command.Help }

// bisect handles `/perf bisect <good> <bad>` on a pull request or an
// issue: maintainers only, every outcome a reply.
func (h *issueCommentHandler) bisect(ctx context.Context, client *github.Client, installationID int64, owner, repo string, number int,
	cmd command.Command, by, deliveryID string, reply func(string) error) error {
	log := zerolog.Ctx(ctx)
	a, err := h.collaboratorAccess(ctx, client, owner, repo, by)
	if err != nil {
		return err
	}
	if !allowed(cmd.Permission, a, false) {
		log.Info().Msg("bisect refused: insufficient permission")
		return reply(fmt.Sprintf("`%s` needs %s; you have %s access, so nothing was run.", usage(cmd), permissionWords(cmd.Permission), accessWord(a)))
	}
	if h.deps.Bisects == nil {
		return reply("bisects are not enabled on this perfgate server.")
	}
	started, err := h.deps.Bisects.StartBisect(ctx, request.Bisect{InstallationID: installationID, Owner: owner, Repo: repo, Number: number,
		Good: cmd.Good, Bad: cmd.Bad, By: by, DeliveryID: deliveryID})
	var refused *request.BisectRefusal
	if errors.As(err, &refused) {
		log.Info().Str("reason", refused.Reason).Msg("bisect refused")
		return reply(fmt.Sprintf("`%s` was not started: %s", usage(cmd), refused.Reason))
	}
	if err != nil {
		return fmt.Errorf("start bisect %s..%s of %s/%s: %w", cmd.Good, cmd.Bad, owner, repo, err)
	}
	log.Info().Int64("bisect", started.ID).Int("commits", started.Commits).Msg("bisect started")
	return reply(startedReply(cmd, started))
}

func startedReply(cmd command.Command, s request.BisectStarted) string {
	commits := fmt.Sprintf("%d commits", s.Commits)
	if s.Commits == 1 {
		commits = "1 commit"
	}
	good, bad := "`"+rev.Short(s.Good)+"`", "`"+rev.Short(s.Bad)+"`"
	if cmd.Good != s.Good && !isPrefix(cmd.Good, s.Good) {
		good = fmt.Sprintf("`%s` (%s)", cmd.Good, good)
	}
	if cmd.Bad != s.Bad && !isPrefix(cmd.Bad, s.Bad) {
		bad = fmt.Sprintf("`%s` (%s)", cmd.Bad, bad)
	}
	return fmt.Sprintf("Bisect started: %s after good %s up to bad %s, on `%s` with the %s tier. "+
		"It measures about %d commits between the ends (a binary search), each interleaved with its reference on one card, with more pairs while the difference is unknown, and confirms the culprit next to its parent; "+
		"at most %d GPU jobs, all on one card. The culprit, the evidence table and every commit measured are posted here when it ends.",
		commits, good, bad, s.Metric, s.Tier, s.Steps, s.MaxJobs)
}

func isPrefix(p, sha string) bool { return len(p) >= 7 && len(p) <= len(sha) && sha[:len(p)] == p }
