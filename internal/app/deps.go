package app

import (
	"context"
	"errors"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/config"
)

// Tier is a benchmark tier; each has its own check run per head SHA.
type Tier string

const (
	TierQuick   Tier = "quick"
	TierMerge   Tier = "merge"
	TierNightly Tier = "nightly"
)

// RunRequest asks for one benchmark run of a tier on a commit. The
// dispatcher records the check run (GitHub learns of it through the
// outbox) and its jobs.
type RunRequest struct {
	InstallationID int64
	Owner, Repo    string
	PR             int // 0 when the run belongs to no single PR (merge group)
	HeadSHA        string
	BaseSHA        string
	BaseRef        string
	Tier           Tier
	Trigger        string // e.g. "pull_request.opened", "/perf retest", "merge_group"
	RequestedBy    string // GitHub login of whoever caused the run
	Author         string // the PR's author, whom a regression warning mentions
	// DeliveryID is the webhook delivery that asked; a retried delivery
	// asks once.
	DeliveryID string
	// ConfigRef is the branch whose config the handler read (the default
	// branch, or a protected base branch); the dispatcher reads it there
	// too. Empty: BaseRef.
	ConfigRef string
	Fork      bool // head lives in a fork: someone triggers.forks allows approved this commit
	// Confirm asks for repeated measurements on the same runner: set for
	// retests and appeals, which follow a suspected regression.
	Confirm bool
}

// FullName is "owner/repo".
func (r RunRequest) FullName() string { return r.Owner + "/" + r.Repo }

// Dispatcher turns requests into durable check runs and jobs
// (internal/dispatch implements it over the store, queue and gate). Every
// method is idempotent for a retried delivery.
type Dispatcher interface {
	// RequestRun records a check run + jobs for (repo, sha, tier) durably
	// before returning.
	RequestRun(ctx context.Context, req RunRequest) error
	// Conclude records a check run that is decided without a run (skipped,
	// waiting for a maintainer, broken or missing config).
	Conclude(ctx context.Context, c ConcludeRequest) error
	// Supersede cancels the PR's pending work for older head SHAs.
	Supersede(ctx context.Context, repo string, pr int, newHeadSHA string) error
	// Close stops a closed PR's work: its jobs are cancelled, its open
	// checks concluded, its clocks stopped.
	Close(ctx context.Context, repo string, pr int, by string) error
}

// ConcludeRequest is a check run decided without a benchmark.
type ConcludeRequest struct {
	InstallationID int64
	Owner, Repo    string
	PR             int
	HeadSHA        string
	Tier           Tier
	Verdict        Verdict // skipped, waiting, config_error, not_configured, error
	Output         Output
	DeliveryID     string
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
	Comment(ctx context.Context, c Comment) error
	React(ctx context.Context, r Reaction) error
}

// Comment is a pull request comment to post.
type Comment struct {
	Key            string
	InstallationID int64
	Owner, Repo    string
	Number         int
	Body           string
}

// Reaction is a reaction to add to an issue comment.
type Reaction struct {
	Key            string
	InstallationID int64
	Owner, Repo    string
	CommentID      int64
	Content        string
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

// ErrNotConfigured is what a ConfigLoader returns for a repository without
// .github/perfgate.yml: perfgate stays quiet there (or posts a neutral
// "not configured" check, as the server is set), never a failure.
var ErrNotConfigured = errors.New("the repository has no " + config.DefaultPath)

// ConfigError is an invalid configuration file. Loaders may return any error
// with a ValidationErrors method instead; the app looks for that method.
type ConfigError struct {
	Path     string
	Problems []string
}

func (e *ConfigError) Error() string {
	return e.Path + " is invalid: " + strings.Join(e.Problems, "; ")
}

// ValidationErrors lists the problems, one per entry.
func (e *ConfigError) ValidationErrors() []string { return e.Problems }

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
	Open(ctx context.Context, a Appeal) error
	// Decide returns ErrNoOpenAppeal when the PR has nothing to decide.
	Decide(ctx context.Context, d Decision) error
}

// ErrNoOpenAppeal is what Appeals.Decide returns when there is no appeal.
var ErrNoOpenAppeal = errors.New("no open appeal")

// Appeal is a PR author's (or writer's) contest of a regression.
type Appeal struct {
	Owner, Repo string
	PR          int
	HeadSHA     string
	By          string
	Reason      string
	CommentURL  string
}

// Decision is a maintainer's verdict on the open appeal.
type Decision struct {
	Owner, Repo string
	PR          int
	HeadSHA     string
	Accept      bool
	By          string
	Reason      string
	CommentURL  string
}

// Approvals remember which commits of forks may run on the runners. An
// approval is of one commit: a new push is a new SHA and needs a new one.
type Approvals interface {
	// Approve records the approval (a commit approved twice keeps its
	// first approval).
	Approve(ctx context.Context, a Approval) error
	// Approved reports whether the commit was approved.
	Approved(ctx context.Context, repo, sha string) (bool, error)
}

// Approval is someone's approval to run one commit of a fork's PR.
type Approval struct {
	Owner, Repo string
	PR          int
	HeadSHA     string // full SHA: the commit the approver saw
	By          string
	Role        string // the approver's role
	Via         string // "/perf approve", "Approve button", "approving review", "label:…"
}

// Acks let a maintainer pass an inconclusive check its tier holds
// (`inconclusive: needs_ack`).
type Acks interface {
	// Ack concludes the pull request's checks that wait for an
	// acknowledgement (its head's, a merge group's made from it) and
	// returns their tiers (none: nothing waits).
	Ack(ctx context.Context, a Ack) ([]Tier, error)
}

// Ack is a maintainer's `/perf ack`.
type Ack struct {
	Owner, Repo string
	PR          int
	HeadSHA     string
	By          string
	Reason      string
	CommentURL  string
}

// Releases is told about published releases (baseline promotion). Optional.
type Releases interface {
	ReleasePublished(ctx context.Context, r Release) error
}

// Release is a published release.
type Release struct {
	InstallationID int64
	Owner, Repo    string
	Tag            string
	TargetCommit   string // branch or SHA the tag points at
	By             string
}
