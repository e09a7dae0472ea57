package app

import (
	"context"
	"errors"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// Dispatcher turns requests into durable check runs and jobs
// (internal/github/dispatch implements it over the store, queue and gate). Every
// method is idempotent for a retried delivery.
type Dispatcher interface {
	// RequestRun records a check run + jobs for (repo, sha, tier) durably
	// before returning.
	RequestRun(ctx context.Context, req request.Run) error
	// Conclude records a check run that is decided without a run (skipped,
	// waiting for a maintainer, broken or missing config).
	Conclude(ctx context.Context, c request.Conclude) error
	// Supersede cancels the PR's pending work for older head SHAs.
	Supersede(ctx context.Context, repo string, pr int, newHeadSHA string) error
	// Close stops a closed PR's work: its jobs are cancelled, its open
	// checks concluded, its clocks stopped.
	Close(ctx context.Context, repo string, pr int, by string) error
}

// Inbox keeps verified webhook deliveries until a worker has processed
// them (the store's webhook inbox).
type Inbox interface {
	// Accept stores the delivery durably before the webhook is answered.
	// duplicate is true for a redelivery of a delivery already processed.
	Accept(ctx context.Context, id, event string, payload []byte) (duplicate bool, err error)
}

// Outbox records GitHub writes that a worker sends until GitHub confirms
// them. A write's Key makes it idempotent: a retried delivery writes once.
type Outbox interface {
	Comment(ctx context.Context, c request.Comment) error
	React(ctx context.Context, r request.Reaction) error
}

// ConfigLoader reads a repository's perfgate configuration at a ref. An
// invalid file is reported as an error satisfying ValidationErrors (see
// ConfigError) so the app can show the problems on a failing check run; a
// missing file as ErrNotConfigured.
type ConfigLoader interface {
	Load(ctx context.Context, client *github.Client, owner, repo, ref string) (RepoConfig, error)
}

// RepoConfig is what the GitHub handlers need from a repository's config.
type RepoConfig struct {
	// Paths are globs ("model/**", "!model/docs/**"); a PR touching none
	// of them is skipped.
	Paths []string
	// Filter decides a changed file against Paths.
	Filter config.PathFilter
	// NoCheckWhenUnmatched posts no check at all for unmatched PRs instead
	// of a skipped one.
	NoCheckWhenUnmatched bool
	Drafts               DraftPolicy
	Forks                ForkPolicy
	// MergeLabel, when set, runs the merge tier when the label is added.
	MergeLabel string
	// MergeOnApproval runs the merge tier on an approving review.
	MergeOnApproval bool
	// Ref is the branch the config was read from (the handlers fill it).
	Ref string
	// Full is the parsed configuration this was mapped from (nil from a
	// loader that has none); it travels in the run request, so the
	// dispatcher plans from the file the handler decided by.
	Full *config.Config
}

// DraftPolicy says what happens to draft PRs.
type DraftPolicy string

const (
	DraftsSkip DraftPolicy = "skip" // default: run when marked ready for review
	DraftsRun  DraftPolicy = "run"
)

// ForkPolicy says who may let a fork's commit run on the runners
// (triggers.forks). Code from a fork never runs unapproved.
type ForkPolicy string

const (
	ForksNever      ForkPolicy = config.ForksNever      // fork PRs never run
	ForksMaintainer ForkPolicy = config.ForksMaintainer // default: after a maintain or admin's approval of the commit
	ForksWrite      ForkPolicy = config.ForksWrite      // after any writer's approval of the commit
)

// DefaultRepoConfig is the configuration an empty perfgate.yml gives.
func DefaultRepoConfig() RepoConfig { return RepoConfigOf(config.Default()) }

type validationErrors interface {
	error
	ValidationErrors() []string
}

func asValidation(err error) (validationErrors, bool) {
	var v validationErrors
	ok := errors.As(err, &v)
	return v, ok
}

// Appeals records `/perf appeal` and maintainers' decisions.
type Appeals interface {
	Open(ctx context.Context, a request.Appeal) error
	// Decide returns ErrNoOpenAppeal when the PR has nothing to decide.
	Decide(ctx context.Context, d request.Decision) error
}

// Approvals remember which commits of forks may run on the runners. An
// approval is of one commit: a new push is a new SHA and needs a new one.
type Approvals interface {
	// Approve records the approval (a commit approved twice keeps its
	// first approval).
	Approve(ctx context.Context, a request.Approval) error
	// Approved reports whether the commit was approved.
	Approved(ctx context.Context, repo, sha string) (bool, error)
}

// Acks let a maintainer pass an inconclusive check its tier holds
// (`inconclusive: needs_ack`).
type Acks interface {
	// Ack concludes the pull request's checks that wait for an
	// acknowledgement (its head's, a merge group's made from it) and
	// returns their tiers (none: nothing waits).
	Ack(ctx context.Context, a request.Ack) ([]check.Tier, error)
}

// Releases is told about published releases (baseline promotion). Optional.
type Releases interface {
	ReleasePublished(ctx context.Context, r request.Release) error
}
