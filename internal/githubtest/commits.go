package githubtest

import (
	"net/http"
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
