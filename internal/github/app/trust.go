package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
	"github.com/rs/zerolog"
)

// configRef is the branch whose .github/perfgate.yml governs t: the
// repository's default branch, or the PR's base branch when that branch
// is protected in a way that puts its config through review (reviewed;
// see reviewed). Anyone with write access can open a PR against a branch
// they pushed themselves; a config written there must not relax the gate
// or let a fork's code run.
func (b *base) configRef(ctx context.Context, client *github.Client, t prTarget) (string, error) {
	def := t.defaultBranch
	if def == "" {
		r, _, err := client.Repositories.Get(ctx, t.owner, t.repo)
		if err != nil {
			return "", fmt.Errorf("default branch of %s: %w", t.fullName(), err)
		}
		def = r.GetDefaultBranch()
		if def == "" {
			return "", fmt.Errorf("default branch of %s: GitHub named none", t.fullName())
		}
	}
	baseBranch := strings.TrimPrefix(t.baseRef, "refs/heads/")
	if baseBranch == "" || baseBranch == def {
		return def, nil
	}
	br, resp, err := client.Repositories.GetBranch(ctx, t.owner, t.repo, baseBranch, 0)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		zerolog.Ctx(ctx).Info().Str("base", baseBranch).Str("default", def).Msg("base branch not found: perfgate config read from the default branch")
		return def, nil
	}
	if err != nil {
		return "", fmt.Errorf("is %s of %s protected: %w", baseBranch, t.fullName(), err)
	}
	why, err := reviewed(ctx, client, t, baseBranch, br.GetProtected())
	if err != nil {
		return "", err
	}
	if why != "" {
		zerolog.Ctx(ctx).Info().Str("base", baseBranch).Str("rule", why).Msg("base branch is protected by review: perfgate config read from it")
		return baseBranch, nil
	}
	zerolog.Ctx(ctx).Info().Str("base", baseBranch).Str("default", def).Msg("base branch has no rule that reviews what lands on it: perfgate config read from the default branch")
	return def, nil
}

// reviewed says which rule of branch makes what lands on it reviewed, or
// "" for none. Only two kinds count, because only they stop a writer from
// pushing a config of their own: a pull request with at least one
// approving review required (classic protection or a ruleset's
// pull_request rule), or pushes restricted to named people (classic
// restrictions, a ruleset's update rule). A rule that only blocks force
// pushes or deletions, or requires status checks, does not. Classic
// protection is read only with the app's "Administration: read"
// permission; without it (403) only rulesets count.
func reviewed(ctx context.Context, client *github.Client, t prTarget, branch string, protected bool) (string, error) {
	rules, resp, err := client.Repositories.GetRulesForBranch(ctx, t.owner, t.repo, branch)
	if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
		return "", fmt.Errorf("rules of %s on %s: %w", branch, t.fullName(), err)
	}
	for _, r := range rules {
		switch r.Type {
		case "update":
			return "ruleset: restrict updates", nil
		case "pull_request":
			var p struct {
				Reviews int `json:"required_approving_review_count"`
			}
			if r.Parameters != nil && json.Unmarshal(*r.Parameters, &p) == nil && p.Reviews >= 1 {
				return fmt.Sprintf("ruleset: pull request with %d approving review(s)", p.Reviews), nil
			}
		}
	}
	if !protected {
		return "", nil
	}
	prot, resp, err := client.Repositories.GetBranchProtection(ctx, t.owner, t.repo, branch)
	if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound) {
		zerolog.Ctx(ctx).Info().Str("base", branch).Int("status", resp.StatusCode).
			Msg("branch protection not readable (the app needs Administration: read): only rulesets count")
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("protection of %s on %s: %w", branch, t.fullName(), err)
	}
	if r := prot.GetRequiredPullRequestReviews(); r != nil && r.RequiredApprovingReviewCount >= 1 {
		return fmt.Sprintf("branch protection: %d approving review(s)", r.RequiredApprovingReviewCount), nil
	}
	if prot.GetRestrictions() != nil {
		return "branch protection: pushes restricted", nil
	}
	return "", nil
}

// forkState is whether a PR's commit may run on the runners.
type forkState int

const (
	forkRuns  forkState = iota // not a fork, or a fork commit someone approved
	forkNever                  // triggers.forks: never
	forkWaits                  // a fork commit nobody (allowed) approved yet
)

// forkStateOf decides t's commit under the repository's fork policy. An
// approval is of one commit: a new push is not approved.
func (b *base) forkStateOf(ctx context.Context, t prTarget, cfg RepoConfig) (forkState, error) {
	if !t.fork {
		return forkRuns, nil
	}
	if cfg.Forks == ForksNever {
		return forkNever, nil
	}
	if b.deps.Approvals == nil {
		return forkWaits, nil
	}
	ok, err := b.deps.Approvals.Approved(ctx, t.fullName(), t.headSHA)
	if err != nil {
		return forkWaits, fmt.Errorf("approval of %s@%s: %w", t.fullName(), rev.Short(t.headSHA), err)
	}
	if ok {
		return forkRuns, nil
	}
	return forkWaits, nil
}

// mayApprove applies triggers.forks to an approver's role.
func mayApprove(p ForkPolicy, a access) bool {
	switch p {
	case ForksWrite:
		return a >= accessWrite
	case ForksMaintainer:
		return a >= accessMaintain
	}
	return false
}

// approverWords says who may approve under p.
func approverWords(p ForkPolicy) string {
	if p == ForksWrite {
		return "someone with write access"
	}
	return "a maintainer (maintain or admin role)"
}

// concludeFork records the check of a fork's commit that may not run: a
// skipped one under `forks: never`, else one waiting for an approval of
// this commit.
func (b *base) concludeFork(ctx context.Context, t prTarget, tier check.Tier, st forkState, cfg RepoConfig, deliveryID string) error {
	if st == forkNever {
		return b.conclude(ctx, t, tier, check.Skipped, check.Output{
			Title: "Fork pull requests do not run here",
			Summary: fmt.Sprintf("This pull request comes from a fork, and this repository's `%s` (on `%s`) says `triggers.forks: never`: "+
				"perfgate never runs a fork's code on its GPU runners. The merge queue, which measures the merged code in this repository, still gates it.", repoconfig.Path, cfg.Ref),
		}, deliveryID)
	}
	return b.conclude(ctx, t, tier, check.Waiting, check.Output{
		Title: "Waiting for approval",
		Summary: fmt.Sprintf("This pull request comes from a fork. perfgate runs a fork's code on its GPU runners only after %s has reviewed the commit and approved it: "+
			"press **Approve** on this check, or comment `/perf approve %s`. An approval is for commit `%s` only: a new push needs a new approval.",
			approverWords(cfg.Forks), t.headSHA, t.headSHA),
	}, deliveryID)
}

// notApprovedReply answers a command or button that would run a fork's
// commit nobody approved.
func notApprovedReply(t prTarget, st forkState, cfg RepoConfig) string {
	if st == forkNever {
		return fmt.Sprintf("this pull request comes from a fork and this repository never runs a fork's code (`triggers.forks: never` in `%s` on `%s`), so nothing was run.", repoconfig.Path, cfg.Ref)
	}
	return fmt.Sprintf("commit `%s` comes from a fork and nobody has approved running it, so nothing was run. After reviewing it, %s can comment `/perf approve %s` or press **Approve** on the check; a new push needs a new approval.",
		rev.Short(t.headSHA), approverWords(cfg.Forks), t.headSHA)
}

// approve records an approval of t's head commit by someone with role a,
// when triggers.forks allows them; it returns the refusal to answer with
// otherwise (and ok false).
func (b *base) approve(ctx context.Context, t prTarget, cfg RepoConfig, by string, a access, via string) (refusal string, ok bool, err error) {
	switch {
	case !t.fork:
		return fmt.Sprintf("this pull request's code lives in the repository itself: it runs without an approval (`%s`).", check.CheckName(check.TierQuick)), false, nil
	case cfg.Forks == ForksNever:
		return fmt.Sprintf("this repository never runs a fork's code (`triggers.forks: never` in `%s` on `%s`), so nothing was approved or run.", repoconfig.Path, cfg.Ref), false, nil
	case !mayApprove(cfg.Forks, a):
		need := "the maintain or admin role"
		if cfg.Forks == ForksWrite {
			need = "write access to the repository"
		}
		return fmt.Sprintf("running a fork's commit needs the approval of someone with %s (`triggers.forks: %s`); you have %s access, so nothing was run.", need, cfg.Forks, accessWord(a)), false, nil
	case b.deps.Approvals == nil:
		return "approvals are not enabled on this perfgate server, so a fork's code cannot run.", false, nil
	}
	err = b.deps.Approvals.Approve(ctx, request.Approval{Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA, By: by, Role: accessWord(a), Via: via})
	if err != nil {
		return "", false, fmt.Errorf("approve %s@%s: %w", t.fullName(), rev.Short(t.headSHA), err)
	}
	zerolog.Ctx(ctx).Info().Str("sha", t.headSHA).Str("by", by).Str("via", via).Msg("fork commit approved")
	return "", true, nil
}

// quickRun decides the quick tier for t's head commit and records it:
// skipped for a draft or a PR touching no gated path, waiting for a fork's
// commit nobody approved, else queued.
func (b *base) quickRun(ctx context.Context, client *github.Client, t prTarget, cfg RepoConfig, trigger, by, deliveryID string) error {
	log := zerolog.Ctx(ctx)
	if t.draft && cfg.Drafts == DraftsSkip {
		return b.conclude(ctx, t, check.TierQuick, check.Skipped,
			check.Output{Title: "Draft pull request", Summary: "perfgate runs when the pull request is marked ready for review."}, deliveryID)
	}
	matched, capped, err := changesGatedFile(ctx, client, t, cfg)
	if err != nil {
		return err
	}
	if !matched && !capped {
		if cfg.NoCheckWhenUnmatched {
			log.Info().Msg("no gated paths changed; no check posted")
			return nil
		}
		return b.conclude(ctx, t, check.TierQuick, check.Skipped,
			check.Output{Title: "No gated changes", Summary: "no " + strings.Join(cfg.Paths, " or ") + " changes"}, deliveryID)
	}
	if capped {
		log.Info().Msg("PR lists the maximum number of files; gating it")
	}
	st, err := b.forkStateOf(ctx, t, cfg)
	if err != nil {
		return err
	}
	if st != forkRuns {
		return b.concludeFork(ctx, t, check.TierQuick, st, cfg, deliveryID)
	}
	return b.queueRun(ctx, b.runRequest(t, cfg, check.TierQuick, trigger, by, deliveryID))
}

// mergeRun records the merge tier for t's head commit (an approving
// review, the merge label): a fork's commit runs when it was approved, or
// when whoever asked may approve it — their review or label is the
// approval, of the commit they saw.
func (b *base) mergeRun(ctx context.Context, t prTarget, cfg RepoConfig, trigger, by string, a access, deliveryID string) error {
	st, err := b.forkStateOf(ctx, t, cfg)
	if err != nil {
		return err
	}
	if st == forkWaits {
		if _, ok, err := b.approve(ctx, t, cfg, by, a, trigger); err != nil {
			return err
		} else if ok {
			st = forkRuns
		}
	}
	if st != forkRuns {
		return b.concludeFork(ctx, t, check.TierMerge, st, cfg, deliveryID)
	}
	return b.queueRun(ctx, b.runRequest(t, cfg, check.TierMerge, trigger, by, deliveryID))
}

// HeadHistory is what an Approvals may also know: the heads perfgate has
// recorded for a pull request. Without it only a full SHA approves.
type HeadHistory interface {
	Heads(ctx context.Context, repo string, pr int) ([]request.SeenHead, error)
}

// prHistory is what GitHub's API says a pull request's branch has held:
// the commits on it now and every commit its timeline names. A force push
// can drop an earlier head from both, so it is flagged; complete is false
// when a list was longer than perfgate reads.
type prHistory struct {
	commits     []string
	forcePushed bool
	complete    bool
}

// Bounds of what prHistory reads: GitHub lists at most 250 commits of a
// pull request; a timeline longer than this many pages is not read whole.
const (
	historyPerPage  = 100
	historyMaxPages = 10
)

// history asks GitHub for t's commits and timeline.
func history(ctx context.Context, client *github.Client, t prTarget) (prHistory, error) {
	h := prHistory{complete: true}
	seen := map[string]bool{}
	add := func(sha string) {
		if sha = strings.ToLower(sha); sha != "" && !seen[sha] {
			seen[sha] = true
			h.commits = append(h.commits, sha)
		}
	}
	opts := &github.ListOptions{PerPage: historyPerPage}
	for page := 0; ; page++ {
		cs, resp, err := client.PullRequests.ListCommits(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return prHistory{}, fmt.Errorf("list the commits of %s#%d: %w", t.fullName(), t.number, err)
		}
		for _, c := range cs {
			add(c.GetSHA())
		}
		if resp.NextPage == 0 {
			// GitHub stops at 250 commits without saying more exist.
			h.complete = h.complete && len(seen) < 250
			break
		}
		if page+1 >= historyMaxPages {
			h.complete = false
			break
		}
		opts.Page = resp.NextPage
	}
	opts = &github.ListOptions{PerPage: historyPerPage}
	for page := 0; ; page++ {
		evs, resp, err := client.Issues.ListIssueTimeline(ctx, t.owner, t.repo, t.number, opts)
		if err != nil {
			return prHistory{}, fmt.Errorf("read the timeline of %s#%d: %w", t.fullName(), t.number, err)
		}
		for _, e := range evs {
			switch e.GetEvent() {
			case "committed":
				add(e.GetSHA())
			case "head_ref_force_pushed":
				h.forcePushed = true
				add(e.GetCommitID())
			}
		}
		if resp.NextPage == 0 {
			break
		}
		if page+1 >= historyMaxPages {
			h.complete = false
			break
		}
		opts.Page = resp.NextPage
	}
	return h, nil
}

// approvedHead decides whether `/perf approve named`, commented at
// commentedAt, approves head (the pull request's head as GitHub's API
// answers it now). A full SHA must be head. A shorter prefix is taken
// only when it can name nothing but the head the approver saw: perfgate
// recorded head as the PR's head before the comment was written; no other
// head of the PR it recorded shares the prefix; and GitHub's API (gh)
// lists head among the PR's commits, no other commit it lists shares the
// prefix, and the branch was never force-pushed. A prefix is 28 bits: a
// fork can grind a second commit to match the reviewed one and push it in
// its place, and perfgate's own record misses heads whose webhooks it
// never got (an outage, or the app installed after the PR opened). It
// returns the refusal, naming the full SHA to use, otherwise.
func approvedHead(named, head string, seen []request.SeenHead, gh *prHistory, known bool, commentedAt time.Time) (refusal string, ok bool) {
	named = strings.ToLower(named)
	if !strings.HasPrefix(head, named) {
		return fmt.Sprintf("`%s` is not this pull request's head commit (it is `%s` now), so nothing was approved or run. Review the new commit and approve it: `/perf approve %s`.",
			named, head, head), false
	}
	if len(named) == len(head) {
		return "", true
	}
	again := fmt.Sprintf("Check that `%s` is the commit you reviewed and approve it by its full SHA: `/perf approve %s`.", head, head)
	if !known || gh == nil {
		return fmt.Sprintf("`%s` is a prefix, and this perfgate server approves only a full SHA, so nothing was approved or run. %s", named, again), false
	}
	var at time.Time
	for _, h := range seen {
		sha := strings.ToLower(h.SHA)
		if sha == head {
			if at.IsZero() || h.First.Before(at) {
				at = h.First
			}
			continue
		}
		if strings.HasPrefix(sha, named) {
			return fmt.Sprintf("`%s` names more than one commit this pull request has had as its head (`%s` and `%s`), so nothing was approved or run. %s", named, sha, head, again), false
		}
	}
	if at.IsZero() || (!commentedAt.IsZero() && at.After(commentedAt)) {
		return fmt.Sprintf("commit `%s` became this pull request's head after your comment was written (or perfgate has not recorded it yet), so `%s` may name another commit than the one you reviewed; nothing was approved or run. %s", head, named, again), false
	}
	onPR := false
	for _, sha := range gh.commits {
		if sha == head {
			onPR = true
			continue
		}
		if strings.HasPrefix(sha, named) {
			return fmt.Sprintf("`%s` names more than one commit of this pull request on GitHub (`%s` and `%s`), so nothing was approved or run. %s", named, sha, head, again), false
		}
	}
	switch {
	case gh.forcePushed:
		return fmt.Sprintf("this pull request's branch was force-pushed, so a commit it held before may share the prefix `%s` and perfgate cannot tell which one you reviewed; nothing was approved or run. %s", named, again), false
	case !gh.complete:
		return fmt.Sprintf("this pull request has more commits than perfgate reads to check that `%s` names one of them; nothing was approved or run. %s", named, again), false
	case !onPR:
		return fmt.Sprintf("GitHub does not list `%s` among this pull request's commits, so `%s` cannot be checked against them; nothing was approved or run. %s", head, named, again), false
	}
	return "", true
}
