package gitbisect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Checkout is a commit's tree on disk: where its engine starts and what
// {{.Workdir}} and {{.SHA}} name.
type Checkout struct {
	Dir, SHA string
}

// CurrentCheckout is the working tree bisect runs in: git's top level and
// HEAD, or the working directory outside git.
func CurrentCheckout(ctx context.Context) (Checkout, error) {
	dir, err := os.Getwd()
	if err != nil {
		return Checkout{}, err
	}
	c := Checkout{Dir: dir}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output(); err == nil {
		c.Dir = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output(); err == nil {
		c.SHA = strings.TrimSpace(string(out))
	}
	return c, nil
}

// ErrSkip marks a commit that cannot be built, started or measured: git
// bisect skips it (exit 125).
var ErrSkip = errors.New("cannot measure this commit")

// Build runs the shell command build in the checkout, its output to w;
// failing makes the checkout unmeasurable.
func Build(ctx context.Context, build string, co Checkout, w io.Writer) error {
	if build == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", build)
	cmd.Dir = co.Dir
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: build %q in %s: %w", ErrSkip, build, co.Dir, err)
	}
	return nil
}

// addWorktree checks sha out in a temporary git worktree of the repository
// at dir; cleanup removes it.
func addWorktree(ctx context.Context, dir, sha string) (Checkout, func(), error) {
	tmp, err := os.MkdirTemp("", "perfgate-bisect-")
	if err != nil {
		return Checkout{}, nil, err
	}
	wt := filepath.Join(tmp, "tree")
	cmd := exec.CommandContext(ctx, "git", "worktree", "add", "--detach", "--quiet", wt, sha)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return Checkout{}, nil, fmt.Errorf("git worktree add: %w: %s", err, strings.TrimSpace(string(out)))
	}
	cleanup := func() {
		rm := exec.Command("git", "worktree", "remove", "--force", wt)
		rm.Dir = dir
		_ = rm.Run()
		os.RemoveAll(tmp)
		prune := exec.Command("git", "worktree", "prune")
		prune.Dir = dir
		_ = prune.Run()
	}
	return Checkout{Dir: wt, SHA: sha}, cleanup, nil
}

// RevParse resolves a revision in the working directory's repository.
func RevParse(ctx context.Context, rev string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", rev).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// ShortName is the current commit's short SHA, or "HEAD".
func ShortName(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "HEAD"
	}
	return strings.TrimSpace(string(out))
}

// gitPath is `git rev-parse --git-path name`: a file in the repository's
// git directory (the worktree's, under git bisect).
func gitPath(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--path-format=absolute", "--git-path", name).Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse --git-path %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// bisectBad is the bad end of the git bisect in progress: the first commit
// its log marked bad (git bisect start BAD GOOD marks BAD first), else
// refs/bisect/bad; "" outside a bisect.
func bisectBad(ctx context.Context) string {
	if p, err := gitPath(ctx, "BISECT_LOG"); err == nil {
		if data, err := os.ReadFile(p); err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if rest, ok := strings.CutPrefix(line, "# bad: ["); ok {
					if sha, _, ok := strings.Cut(rest, "]"); ok {
						return sha
					}
				}
			}
		}
	}
	sha, _ := RevParse(ctx, "refs/bisect/bad")
	return sha
}
