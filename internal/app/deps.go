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

// RunRequest asks for one benchmark run of a tier on a commit. The check run
// it reports to already exists (CheckRunID, status queued).
type RunRequest struct {
	InstallationID int64
	Owner, Repo    string
	PR             int // 0 when the run belongs to no single PR (merge group)
	HeadSHA        string
	BaseSHA        string
	BaseRef        string
	Tier           Tier
	CheckRunID     int64
	Trigger        string // e.g. "pull_request.opened", "/perf retest", "merge_group"
	RequestedBy    string // GitHub login of whoever caused the run
	DeliveryID     string
	Fork           bool // head lives in a fork: the run was approved by a maintainer
	// Confirm asks for repeated measurements on the same runner: set for
	// retests and appeals, which follow a suspected regression.
	Confirm bool
}

// FullName is "owner/repo".
func (r RunRequest) FullName() string { return r.Owner + "/" + r.Repo }

// Dispatcher turns requests into durable jobs (internal/dispatch implements
// it over the store, queue and gate).
type Dispatcher interface {
	// RequestRun records a check run + job for (repo, sha, tier) durably
	// BEFORE returning.
	RequestRun(ctx context.Context, req RunRequest) error
	// Supersede cancels the PR's pending work for older head SHAs.
	Supersede(ctx context.Context, repo string, pr int, newHeadSHA string) error
}

// Deliveries remembers webhook delivery GUIDs so a redelivery runs once.
type Deliveries interface {
	// MarkDelivery records id and reports whether this is its first sighting.
	MarkDelivery(ctx context.Context, id, event string) (first bool, err error)
}

// ConfigLoader reads a repository's perfgate configuration at a ref. An
// invalid file is reported as an error satisfying ValidationErrors (see
// ConfigError) so the app can show the problems on a failing check run.
type ConfigLoader interface {
	Load(ctx context.Context, client *github.Client, owner, repo, ref string) (RepoConfig, error)
}

// RepoConfig is what the GitHub handlers need from a repository's config.
type RepoConfig struct {
	// Paths are globs ("model/**"); a PR touching none of them is skipped.
	Paths []string
	// NoCheckWhenUnmatched posts no check at all for unmatched PRs instead
	// of a skipped one.
	NoCheckWhenUnmatched bool
	Drafts               DraftPolicy
	Forks                ForkPolicy
	// MergeLabel, when set, runs the merge tier when the label is added.
	MergeLabel string
	// MergeOnApproval runs the merge tier on an approving review.
	MergeOnApproval bool
}

// DraftPolicy says what happens to draft PRs.
type DraftPolicy string

const (
	DraftsSkip DraftPolicy = "skip" // default: run when marked ready for review
	DraftsRun  DraftPolicy = "run"
)

// ForkPolicy says whether code from forks runs on the runners unasked.
type ForkPolicy string

const (
	ForksWait ForkPolicy = "wait" // default: wait for a maintainer's /perf retest
	ForksRun  ForkPolicy = "run"
)

// DefaultRepoConfig is used when a repository has no perfgate.yml.
func DefaultRepoConfig() RepoConfig { return RepoConfigOf(config.Default()) }

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
