package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// getCommit answers GET /repos/{owner}/{repo}/commits/{ref} from the git
// repository SetGitRepo names, as GitHub does: the commit a SHA, branch
// or tag names, or with Accept: application/vnd.github.sha just its SHA
// (go-github's GetCommitSHA1); 422 for a ref no commit answers to.
func (s *Server) getCommit(w http.ResponseWriter, r *http.Request) {
	repo := repoOf(r)
	s.mu.Lock()
	dir, ok := s.gitDirs[repo]
	s.mu.Unlock()
	ref := r.PathValue("ref")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	g := gitDir(dir)
	sha, err := g.resolve(ref)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+ref)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.github") && strings.HasSuffix(r.Header.Get("Accept"), ".sha") {
		w.Header().Set("Content-Type", "application/vnd.github.sha; charset=utf-8")
		w.Header().Set("ETag", `"`+sha+`"`)
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(sha)) //nolint:errcheck // a test server's reply
		return
	}
	c, err := g.log("-1", sha)
	if err != nil || len(c) != 1 {
		writeError(w, http.StatusInternalServerError, "git log failed")
		return
	}
	writeJSON(w, http.StatusOK, s.commitJSON(repo, c[0]))
}

// listCommitPulls answers GET /repos/{owner}/{repo}/commits/{sha}/pulls:
// the pull requests SetPullRequest stored whose head or merge commit is
// sha, by number.
func (s *Server) listCommitPulls(w http.ResponseWriter, r *http.Request) {
	repo, sha := repoOf(r), r.PathValue("sha")
	s.mu.Lock()
	var out []json.RawMessage
	var numbers []int
	for key, raw := range s.pulls {
		if !strings.HasPrefix(key, repo+"#") {
			continue
		}
		var pr struct {
			Number         int    `json:"number"`
			MergeCommitSHA string `json:"merge_commit_sha"`
			Head           struct {
				SHA string `json:"sha"`
			} `json:"head"`
		}
		if json.Unmarshal(raw, &pr) != nil || (pr.Head.SHA != sha && pr.MergeCommitSHA != sha) {
			continue
		}
		i := sort.SearchInts(numbers, pr.Number)
		numbers = slices.Insert(numbers, i, pr.Number)
		out = slices.Insert(out, i, raw)
	}
	s.mu.Unlock()
	if out == nil {
		out = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, out)
}
