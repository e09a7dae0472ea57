// Package request holds what the GitHub handlers (internal/github/app) ask of the
// domain and what it answers: a run of a tier on a commit, a check decided
// without a run, comments and reactions for the outbox, appeals,
// approvals, acknowledgements, releases, bisects, profiles and root
// causes. The handlers declare the interfaces they call (app.Dispatcher,
// app.Findings, …); the domain packages implement them with these types
// and never import the GitHub layer.
package request

import (
	"errors"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Run asks for one benchmark run of a tier on a commit. The
// dispatcher records the check run (GitHub learns of it through the
// outbox) and its jobs.
type Run struct {
	InstallationID int64
	Owner, Repo    string
	PR             int // 0 when the run belongs to no single PR (merge group)
	HeadSHA        string
	BaseSHA        string
	BaseRef        string
	Tier           check.Tier
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
	// Config is the repository's configuration the handler read at
	// ConfigRef and decided by, parsed once: the dispatcher plans the run
	// from it, so the run measures what the handler saw. nil (the nightly,
	// a caller that read none): the dispatcher reads it at ConfigRef.
	Config *config.Config
}

// FullName is "owner/repo".
func (r Run) FullName() string { return r.Owner + "/" + r.Repo }

// Conclude is a check run decided without a benchmark.
type Conclude struct {
	InstallationID int64
	Owner, Repo    string
	PR             int
	HeadSHA        string
	Tier           check.Tier
	Phase          check.Phase // skipped, waiting, config_error, not_configured, errored
	Output         check.Output
	DeliveryID     string
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

// Approval is someone's approval to run one commit of a fork's PR.
type Approval struct {
	Owner, Repo string
	PR          int
	HeadSHA     string // full SHA: the commit the approver saw
	By          string
	Role        string // the approver's role
	Via         string // "/perf approve", "Approve button", "approving review", "label:…"
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

// Release is a published release.
type Release struct {
	InstallationID int64
	Owner, Repo    string
	Tag            string
	TargetCommit   string // branch or SHA the tag points at
	By             string
}

// Bisect is a maintainer's `/perf bisect <good> <bad>`.
type Bisect struct {
	InstallationID int64
	Owner, Repo    string
	// Number is the pull request or issue the command was posted on: the
	// result is reported there.
	Number     int
	Good, Bad  string // as written: SHAs, tags or branches
	By         string
	DeliveryID string
}

// BisectStarted is a bisect that is running.
type BisectStarted struct {
	ID        int64
	Good, Bad string // the SHAs the refs resolved to
	Metric    string
	Tier      string
	// Commits is the number of commits after the good one; Steps the
	// commits a binary search measures between the ends (⌈log2 Commits⌉);
	// MaxJobs the GPU jobs it may spend.
	Commits, Steps, MaxJobs int
	// Card is the GPU every job runs on, when it is pinned already.
	Card string
}

// BisectRefusal is a bisect that cannot start as asked, and what to do.
type BisectRefusal struct{ Reason string }

func (e *BisectRefusal) Error() string { return e.Reason }

// ErrNoRegression: the PR has no regression verdict to record a cause of.
var ErrNoRegression = errors.New("no regression verdict on this pull request")

// Profile asks for a profiling pass.
type Profile struct {
	InstallationID int64
	Owner, Repo    string
	PR             int
	HeadSHA        string
	BaseSHA        string
	BaseRef        string
	ConfigRef      string // the branch whose config decides (see Run)
	By             string
	Trigger        string // "/perf profile"
	DeliveryID     string
	// Config is the configuration the handler read (see Run.Config).
	Config *config.Config
}

// ProfileQueued says what was queued: the job, or the pass already queued
// or running for the same commits.
type ProfileQueued struct {
	JobID    int64
	Already  bool
	Requests int
}

// RootCause is a maintainer's `/perf rootcause`.
type RootCause struct {
	Owner, Repo string
	PR          int
	PRURL       string
	HeadSHA     string
	Cause       string
	Fix         string
	By          string
}

// RootCauseRecorded is what the knowledge base kept.
type RootCauseRecorded struct {
	ID         int64
	Commit     string // the commit the regression verdict measured
	Tier       string
	Phenomenon string // "tpot_p99 +25%, ttft_p90 −8%"
	// Profile is the profile diff's top findings, "" when no profile of
	// the PR finished.
	Profile string
}

// SeenHead is a commit perfgate recorded as a pull request's head, and
// when it first did.
type SeenHead struct {
	SHA   string
	First time.Time
}
