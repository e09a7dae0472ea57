package githubtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// codeloadTTL is how long a download URL from a tarball redirect works,
// as GitHub's codeload links expire after a few minutes.
const codeloadTTL = 5 * time.Minute

// Tarballs come from the git repository SetGitRepo names (compare.go):
// GET /repos/{owner}/{repo}/tarball/{ref} answers 302 to a short-lived
// download URL, and that URL streams `git archive --format=tar.gz` of the
// commit under the top directory {owner}-{repo}-{short sha}/, as GitHub's
// codeload does.

// getTarball resolves the ref and redirects to a download URL that needs
// no installation token (it carries its own), like GitHub's.
func (s *Server) getTarball(w http.ResponseWriter, r *http.Request) {
	repo := repoOf(r)
	s.mu.Lock()
	dir, ok := s.gitDirs[repo]
	s.mu.Unlock()
	ref := r.PathValue("ref")
	if !ok || ref == "" || strings.HasPrefix(ref, "-") {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	out, err := exec.CommandContext(r.Context(), "git", "-C", dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}").Output()
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	sha := strings.TrimSpace(string(out))
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.downloads[tok] = download{repo: repo, sha: sha, expires: time.Now().Add(codeloadTTL)}
	s.mu.Unlock()
	w.Header().Set("Location", s.URL+"/_codeload/"+repo+"/legacy.tar.gz/"+sha+"?token="+tok)
	w.WriteHeader(http.StatusFound)
}

type download struct {
	repo, sha string
	expires   time.Time
}

// codeload streams the archive a redirect pointed at; a missing, foreign
// or expired token is refused as GitHub refuses it.
func (s *Server) codeload(w http.ResponseWriter, r *http.Request) {
	repo, sha := repoOf(r), r.PathValue("sha")
	s.mu.Lock()
	d, ok := s.downloads[r.URL.Query().Get("token")]
	dir := s.gitDirs[repo]
	s.mu.Unlock()
	if !ok || d.repo != repo || d.sha != sha || time.Now().After(d.expires) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	owner, name, _ := strings.Cut(repo, "/")
	prefix := owner + "-" + name + "-" + sha[:min(7, len(sha))] + "/"
	cmd := exec.CommandContext(r.Context(), "git", "-C", dir, "archive", "--format=tar.gz", "--prefix="+prefix, sha)
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Disposition", "attachment; filename="+strings.TrimSuffix(prefix, "/")+".tar.gz")
	cmd.Stdout = w
	if err := cmd.Run(); err != nil && r.Context().Err() == nil {
		// The head is gone; a broken stream is what the client sees.
		return
	}
}
