package githubtest

import (
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
)

// SetGitRepo backs repo's compare API with the git repository in dir (one
// a test built with git, e.g. NewGitRepo).
func (s *Server) SetGitRepo(repo, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gitDirs == nil {
		s.gitDirs = map[string]string{}
	}
	s.gitDirs[repo] = dir
}

// compareRoutes adds GET /repos/{owner}/{repo}/compare/{base}...{head}
// and GET /repos/{owner}/{repo}/commits/{ref} and …/commits/{sha}/pulls
// (commits.go).
func (s *Server) compareRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /repos/{owner}/{repo}/compare/{basehead...}", s.auth(s.compare))
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref...}", s.auth(s.getCommit))
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/pulls", s.auth(s.listCommitPulls))
}

// compareDefaultLimit is how many commits GitHub returns when no paging
// parameter is given: the most recent 250 of the comparison.
const compareDefaultLimit = 250

// compare answers as GitHub does: the commits reachable from head and not
// from base, oldest first, paged with per_page (≤ 100, default 30) and page
// when either is given, else the last 250.
func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	repo := repoOf(r)
	s.mu.Lock()
	dir, ok := s.gitDirs[repo]
	s.mu.Unlock()
	base, head, okRange := strings.Cut(r.PathValue("basehead"), "...")
	if !ok || !okRange || base == "" || head == "" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	g := gitDir(dir)
	baseSHA, err := g.resolve(base)
	if err != nil {
		writeError(w, http.StatusNotFound, "No commit found for SHA: "+base)
		return
	}
	headSHA, err := g.resolve(head)
	if err != nil {
		writeError(w, http.StatusNotFound, "No commit found for SHA: "+head)
		return
	}
	mergeBase, err := g.run("merge-base", baseSHA, headSHA)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("No common ancestor between %s and %s.", base, head))
		return
	}
	ahead, err1 := g.count(mergeBase + ".." + headSHA)
	behind, err2 := g.count(mergeBase + ".." + baseSHA)
	if err1 != nil || err2 != nil {
		writeError(w, http.StatusInternalServerError, "git rev-list failed")
		return
	}
	status := "diverged"
	switch {
	case ahead == 0 && behind == 0:
		status = "identical"
	case behind == 0:
		status = "ahead"
	case ahead == 0:
		status = "behind"
	}
	commits, err := g.log(mergeBase + ".." + headSHA)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "git log failed: "+err.Error())
		return
	}
	total := len(commits)
	q := r.URL.Query()
	paged := q.Has("per_page") || q.Has("page")
	page, perPage := 1, 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	var shown []gitCommit
	if paged {
		start := min((page-1)*perPage, total)
		shown = commits[start:min(start+perPage, total)]
		if last := max(1, (total+perPage-1)/perPage); page < last {
			u := *r.URL
			u.Scheme, u.Host = "http", r.Host
			qq := u.Query()
			qq.Set("per_page", strconv.Itoa(perPage))
			qq.Set("page", strconv.Itoa(page+1))
			u.RawQuery = qq.Encode()
			next := u.String()
			qq.Set("page", strconv.Itoa(last))
			u.RawQuery = qq.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, next, u.String()))
		}
	} else {
		shown = commits[max(0, total-compareDefaultLimit):]
	}
	out := make([]map[string]any, 0, len(shown))
	for _, c := range shown {
		out = append(out, s.commitJSON(repo, c))
	}
	baseCommit, err1 := g.log("-1", baseSHA)
	mbCommit, err2 := g.log("-1", mergeBase)
	if err1 != nil || err2 != nil || len(baseCommit) != 1 || len(mbCommit) != 1 {
		writeError(w, http.StatusInternalServerError, "git log failed")
		return
	}
	body := map[string]any{
		"url":               fmt.Sprintf("%s/repos/%s/compare/%s...%s", s.URL, repo, url.PathEscape(base), url.PathEscape(head)),
		"html_url":          fmt.Sprintf("%s/%s/compare/%s...%s", s.URL, repo, base, head),
		"permalink_url":     fmt.Sprintf("%s/%s/compare/%s...%s", s.URL, repo, baseSHA[:7], headSHA[:7]),
		"status":            status,
		"ahead_by":          ahead,
		"behind_by":         behind,
		"total_commits":     total,
		"base_commit":       s.commitJSON(repo, baseCommit[0]),
		"merge_base_commit": s.commitJSON(repo, mbCommit[0]),
		"commits":           out,
	}
	if page == 1 {
		files, err := g.files(mergeBase, headSHA)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "git diff failed")
			return
		}
		body["files"] = files
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) commitJSON(repo string, c gitCommit) map[string]any {
	parents := make([]map[string]any, 0, len(c.parents))
	for _, p := range c.parents {
		parents = append(parents, map[string]any{"sha": p,
			"url": s.URL + "/repos/" + repo + "/commits/" + p, "html_url": s.URL + "/" + repo + "/commit/" + p})
	}
	person := func(name, email, date string) map[string]any {
		return map[string]any{"name": name, "email": email, "date": date}
	}
	return map[string]any{
		"sha":      c.sha,
		"url":      s.URL + "/repos/" + repo + "/commits/" + c.sha,
		"html_url": s.URL + "/" + repo + "/commit/" + c.sha,
		"commit": map[string]any{
			"message":   c.message,
			"author":    person(c.authorName, c.authorEmail, c.authorDate),
			"committer": person(c.committerName, c.committerEmail, c.committerDate),
			"tree":      map[string]any{"sha": c.tree},
		},
		"parents": parents,
	}
}

// gitDir runs git in one repository.
type gitDir string

type gitCommit struct {
	sha, tree                                    string
	parents                                      []string
	authorName, authorEmail, authorDate          string
	committerName, committerEmail, committerDate string
	message                                      string
}

// gitFile reads path at ref in the repository in dir; false when the ref
// or the file does not exist there (or names a directory).
func gitFile(dir, ref, path string) ([]byte, bool) {
	g := gitDir(dir)
	sha, err := g.resolve(ref)
	if err != nil || strings.HasPrefix(path, "-") {
		return nil, false
	}
	if kind, err := g.run("cat-file", "-t", sha+":"+path); err != nil || kind != "blob" {
		return nil, false
	}
	out, err := exec.Command("git", "-C", dir, "cat-file", "blob", sha+":"+path).Output()
	if err != nil {
		return nil, false
	}
	return out, true
}

func (g gitDir) run(args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", string(g)}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (g gitDir) resolve(ref string) (string, error) {
	if strings.HasPrefix(ref, "-") {
		return "", fmt.Errorf("bad ref %q", ref)
	}
	return g.run("rev-parse", "--verify", "--quiet", ref+"^{commit}")
}

func (g gitDir) count(rng string) (int, error) {
	out, err := g.run("rev-list", "--count", rng)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(out)
}

// log lists commits oldest first, parents before children.
func (g gitDir) log(args ...string) ([]gitCommit, error) {
	const format = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B%x1e"
	out, err := g.run(append([]string{"log", "--reverse", "--topo-order", "--format=" + format}, args...)...)
	if err != nil {
		return nil, err
	}
	var cs []gitCommit
	for _, rec := range strings.Split(out, "\x1e") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\x00", 10)
		if len(f) != 10 {
			return nil, fmt.Errorf("git log: unexpected record %q", rec)
		}
		cs = append(cs, gitCommit{sha: f[0], tree: f[1], parents: strings.Fields(f[2]),
			authorName: f[3], authorEmail: f[4], authorDate: f[5],
			committerName: f[6], committerEmail: f[7], committerDate: f[8],
			message: strings.TrimRight(f[9], "\n")})
	}
	return cs, nil
}

// files is the comparison's changed files, as GitHub lists them.
func (g gitDir) files(base, head string) ([]map[string]any, error) {
	out, err := g.run("diff", "--name-status", "--no-renames", base, head)
	if err != nil {
		return nil, err
	}
	status := map[string]string{"A": "added", "D": "removed", "M": "modified"}
	files := []map[string]any{}
	for _, line := range strings.Split(out, "\n") {
		st, name, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		s := status[st]
		if s == "" {
			s = "changed"
		}
		files = append(files, map[string]any{"filename": name, "status": s})
	}
	return files, nil
}
