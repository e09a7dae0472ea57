package bisect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// CommitLister lists the commits of a bisect: the good commit first, then
// every commit after it up to and including the bad one.
type CommitLister interface {
	ListCommits(ctx context.Context, repo, good, bad string) ([]Commit, error)
}

// MaxCommits caps a bisect's range: past it, narrow the range first (a
// change point's good and bad commits, or two releases).
const MaxCommits = 5000

// ErrRange marks a range that cannot be bisected as asked: a commit GitHub
// does not know, ends that are the same commit or in the wrong order, a
// good commit that is not an ancestor of the bad one, too many commits.
// The person who asked fixes it; trying again cannot.
var ErrRange = errors.New("cannot bisect this range")

// GitHubLister lists commits with GitHub's compare API
// (GET /repos/{owner}/{repo}/compare/{good}...{bad}), following the bad
// commit's first parents back to the good one, as `git bisect
// --first-parent` does: on a default branch that is one commit per merged
// pull request, each of which was built and tested as a whole.
type GitHubLister struct {
	Client *github.Client
}

var _ CommitLister = GitHubLister{}

// ListCommits implements CommitLister. good and bad are SHAs or refs.
func (l GitHubLister) ListCommits(ctx context.Context, repo, good, bad string) ([]Commit, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("list commits: repository %q is not owner/name", repo)
	}
	what := fmt.Sprintf("compare %s...%s in %s", good, bad, repo)
	opts := &github.ListOptions{PerPage: 100}
	var (
		cmp *github.CommitsComparison
		all []*github.RepositoryCommit
	)
	for {
		c, resp, err := l.Client.Repositories.CompareCommits(ctx, owner, name, good, bad, opts)
		if err != nil {
			var ge *github.ErrorResponse
			if errors.As(err, &ge) && ge.Response != nil && ge.Response.StatusCode == 404 {
				return nil, fmt.Errorf("%s: GitHub does not know one of the commits (%s): check both are pushed to %s: %w", what, ge.Message, repo, ErrRange)
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if cmp == nil {
			cmp = c
		}
		all = append(all, c.Commits...)
		if len(all) > MaxCommits {
			return nil, fmt.Errorf("%s: more than %d commits: bisect a narrower range: %w", what, MaxCommits, ErrRange)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	switch cmp.GetStatus() {
	case "ahead":
	case "identical":
		return nil, fmt.Errorf("%s: the good and bad commits are the same commit: %w", what, ErrRange)
	case "behind":
		return nil, fmt.Errorf("%s: the bad commit is older than the good one: swap them: %w", what, ErrRange)
	default:
		return nil, fmt.Errorf("%s: the good commit is not an ancestor of the bad one (%s): pick a good commit on the bad one's history: %w", what, cmp.GetStatus(), ErrRange)
	}
	base := cmp.GetBaseCommit()
	chain, err := firstParents(all, base.GetSHA())
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, ErrRange)
	}
	out := []Commit{fromGitHub(base)}
	for _, c := range chain {
		out = append(out, fromGitHub(c))
	}
	return out, nil
}

// firstParents orders the comparison's commits from the one after base to
// the head along first parents; the head is the commit no other lists as a
// parent.
func firstParents(commits []*github.RepositoryCommit, base string) ([]*github.RepositoryCommit, error) {
	bySHA := make(map[string]*github.RepositoryCommit, len(commits))
	isParent := map[string]bool{}
	for _, c := range commits {
		bySHA[c.GetSHA()] = c
		for _, p := range c.Parents {
			isParent[p.GetSHA()] = true
		}
	}
	var heads []string
	for _, c := range commits {
		if !isParent[c.GetSHA()] {
			heads = append(heads, c.GetSHA())
		}
	}
	if len(heads) != 1 {
		return nil, fmt.Errorf("the comparison lists %d head commits, want 1", len(heads))
	}
	var chain []*github.RepositoryCommit
	for sha := heads[0]; sha != base; {
		c, ok := bySHA[sha]
		if !ok {
			return nil, fmt.Errorf("the first-parent chain leaves the comparison at %s before reaching the good commit", rev.Short(sha))
		}
		chain = append(chain, c)
		if len(c.Parents) == 0 {
			return nil, fmt.Errorf("the first-parent chain ends at root commit %s before reaching the good commit", rev.Short(sha))
		}
		sha = c.Parents[0].GetSHA()
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

func fromGitHub(c *github.RepositoryCommit) Commit {
	msg := c.GetCommit().GetMessage()
	return Commit{SHA: c.GetSHA(), Title: Title(msg), PR: PRFromMessage(msg), URL: c.GetHTMLURL()}
}
