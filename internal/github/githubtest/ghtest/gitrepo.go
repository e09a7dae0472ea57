package ghtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// GitRepo is a real git repository a test builds commit by commit, to back
// the fake's compare API or to run git bisect in.
type GitRepo struct {
	t   testing.TB
	Dir string
	n   int // commits made: dates them
}

// NewGitRepo creates an empty repository on branch main in a temporary
// directory, with a fixed identity and dates so commits are reproducible.
func NewGitRepo(t testing.TB) *GitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: " + err.Error())
	}
	r := &GitRepo{t: t, Dir: t.TempDir()}
	r.Git("init", "--quiet", "--initial-branch=main")
	return r
}

// Git runs git in the repository and returns its trimmed output; a failure
// fails the test.
func (r *GitRepo) Git(args ...string) string {
	r.t.Helper()
	out, err := r.Run(args...)
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Run runs git in the repository and returns its trimmed output and error.
func (r *GitRepo) Run(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", r.Dir}, args...)...)
	cmd.Env = append(os.Environ(), gitEnv(0)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Commit writes files (path → content; "" deletes) and commits them with
// message, returning the new commit's SHA.
func (r *GitRepo) Commit(message string, files map[string]string) string {
	r.t.Helper()
	for path, content := range files {
		full := filepath.Join(r.Dir, filepath.FromSlash(path))
		if content == "" {
			r.Git("rm", "--quiet", "--", path)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.Git("add", "--", path)
	}
	r.n++
	cmd := exec.Command("git", "-C", r.Dir, "commit", "--quiet", "--allow-empty", "-m", message)
	cmd.Env = append(os.Environ(), gitEnv(r.n)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git commit: %v\n%s", err, out)
	}
	return r.Git("rev-parse", "HEAD")
}

// gitEnv fixes identity and dates: commit n is dated n seconds after a
// fixed instant, so commit order is chronological order.
func gitEnv(n int) []string {
	date := fmt.Sprintf("2025-03-01T12:%02d:%02dZ", n/60%60, n%60)
	return []string{
		"GIT_AUTHOR_NAME=Perf Gate", "GIT_AUTHOR_EMAIL=perfgate@example.com", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=Perf Gate", "GIT_COMMITTER_EMAIL=perfgate@example.com", "GIT_COMMITTER_DATE=" + date,
		"GIT_CONFIG_NOSYSTEM=1", "HOME=" + os.TempDir(),
	}
}

// Commits makes n commits on the current branch in one git fast-import
// (hundreds of commits in a fraction of a second), commit i with the
// message and files each(i) returns, and checks the result out. It returns
// the new SHAs, oldest first.
func (r *GitRepo) Commits(n int, each func(i int) (message string, files map[string]string)) []string {
	r.t.Helper()
	branch := r.Git("symbolic-ref", "HEAD")
	parent, _ := r.Run("rev-parse", "--verify", "--quiet", "HEAD")
	var b strings.Builder
	for i := range n {
		msg, files := each(i)
		r.n++
		when := fmt.Sprintf("%d +0000", 1740830400+r.n)
		fmt.Fprintf(&b, "commit %s\nauthor Perf Gate <perfgate@example.com> %s\ncommitter Perf Gate <perfgate@example.com> %s\n", branch, when, when)
		fmt.Fprintf(&b, "data %d\n%s\n", len(msg), msg)
		if i == 0 && parent != "" {
			fmt.Fprintf(&b, "from %s\n", parent)
		}
		paths := make([]string, 0, len(files))
		for p := range files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			if files[p] == "" {
				fmt.Fprintf(&b, "D %s\n", p)
				continue
			}
			fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", p, len(files[p]), files[p])
		}
		b.WriteString("\n")
	}
	cmd := exec.Command("git", "-C", r.Dir, "fast-import", "--quiet")
	cmd.Env = append(os.Environ(), gitEnv(r.n)...)
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	r.Git("reset", "--quiet", "--hard", "HEAD")
	return strings.Fields(r.Git("rev-list", "--reverse", "--max-count="+fmt.Sprint(n), "HEAD"))
}
