package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/github/command"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Findings take a regression from its verdict to its cause: profiling
// passes of a PR's base and head, and the knowledge base of recorded root
// causes (internal/github/dispatch implements it).
type Findings interface {
	// Profile queues a profiling pass of the PR's base and head.
	Profile(ctx context.Context, r request.Profile) (request.ProfileQueued, error)
	// RootCause records the cause of the PR's last regression verdict;
	// ErrNoRegression when the PR has none.
	RootCause(ctx context.Context, r request.RootCause) (request.RootCauseRecorded, error)
}

// profileCommand runs `/perf profile`.
func (h *issueCommentHandler) profileCommand(ctx context.Context, client *github.Client, t prTarget, by, deliveryID string) (string, error) {
	if h.deps.Findings == nil {
		return "profiling is not enabled on this perfgate server, so nothing was run.", nil
	}
	// A profile runs the PR's code like a measurement: a fork's commit
	// needs its approval first.
	cfg, msg, ok, err := h.runnable(ctx, client, t, check.TierQuick, deliveryID)
	if !ok {
		return msg, err
	}
	q, err := h.deps.Findings.Profile(ctx, request.Profile{InstallationID: t.installationID, Owner: t.owner, Repo: t.repo, PR: t.number,
		HeadSHA: t.headSHA, BaseSHA: t.baseSHA, BaseRef: t.baseRef, ConfigRef: cfg.Ref, By: by, Trigger: "/perf profile", DeliveryID: deliveryID, Config: cfg.Full})
	if err != nil {
		return "", fmt.Errorf("queue profile of %s#%d: %w", t.fullName(), t.number, err)
	}
	if q.Already {
		return fmt.Sprintf("A profile of base `%s` and head `%s` is already queued or running (job %d); its diff will be posted here.",
			rev.Short(t.baseSHA), rev.Short(t.headSHA), q.JobID), nil
	}
	return fmt.Sprintf("Profiling base `%s` and head `%s` (job %d: %d requests each, with the engine's profiler on); \"where the time went\" will be posted here with links to both traces.",
		rev.Short(t.baseSHA), rev.Short(t.headSHA), q.JobID, q.Requests), nil
}

// rootCauseCommand runs `/perf rootcause <cause> [fix <link>]`.
func (h *issueCommentHandler) rootCauseCommand(ctx context.Context, t prTarget, cmd command.Command, by, prURL string) (string, error) {
	if h.deps.Findings == nil {
		return "the knowledge base is not enabled on this perfgate server, so nothing was recorded.", nil
	}
	r, err := h.deps.Findings.RootCause(ctx, request.RootCause{Owner: t.owner, Repo: t.repo, PR: t.number, PRURL: prURL,
		HeadSHA: t.headSHA, Cause: cmd.Reason, Fix: cmd.Fix, By: by})
	if errors.Is(err, request.ErrNoRegression) {
		return "this pull request has no regression verdict, so there is no phenomenon to record a cause for and nothing was recorded. " +
			"Record the cause on the pull request whose check found the regression.", nil
	}
	if err != nil {
		return "", fmt.Errorf("record root cause on %s#%d: %w", t.fullName(), t.number, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Recorded in the knowledge base (entry %d):\n\n", r.ID)
	fmt.Fprintf(&b, "- **phenomenon**: %s (the `%s` verdict on `%s`)\n", r.Phenomenon, check.CheckName(check.Tier(r.Tier)), rev.Short(r.Commit))
	if r.Profile != "" {
		fmt.Fprintf(&b, "- **profile**: %s\n", r.Profile)
	} else {
		b.WriteString("- **profile**: none taken (`/perf profile` adds one; record again after it to include its fingerprint)\n")
	}
	fmt.Fprintf(&b, "- **cause**: %s\n", cmd.Reason)
	if cmd.Fix != "" {
		fmt.Fprintf(&b, "- **fix**: %s\n", cmd.Fix)
	}
	b.WriteString("\nA later regression whose signature is close to this one will say so in its check run.")
	return b.String(), nil
}

// prURLOf is the pull request's page from a comment's link on it
// (…/pull/17#issuecomment-1 → …/pull/17).
func prURLOf(commentURL string) string {
	u, _, _ := strings.Cut(commentURL, "#")
	return u
}
