package githubtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Issue is an issue the app opened or edited.
type Issue struct {
	Number int
	Repo   string
	Title  string
	Body   string
	Labels []string
	State  string
	// Edits counts PATCHes after creation.
	Edits int
}

// repoState is what the fake knows of a repository beyond its PRs.
type repoState struct {
	private       bool
	defaultBranch string
	branches      map[string]branchState // branches.go
}

// SetPrivate marks a repository private (repositories are public otherwise)
// for GET /repos/{owner}/{repo}.
func (s *Server) SetPrivate(repo string, private bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoState(repo).private = private
}

// Issues returns the issues opened, in order.
func (s *Server) Issues() []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Issue, 0, len(s.issues))
	for _, is := range s.issues {
		c := *is
		c.Labels = append([]string(nil), is.Labels...)
		out = append(out, c)
	}
	return out
}

// issueRoutes adds the issues API (create, edit, list), the repository
// and its installation.
func (s *Server) issueRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues", s.auth(s.createIssue))
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/{number}", s.auth(s.editIssue))
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues", s.auth(s.listIssues))
	mux.HandleFunc("GET /repos/{owner}/{repo}", s.repoAny) // installation or user token (oauth.go)
	mux.HandleFunc("GET /repos/{owner}/{repo}/branches/{branch...}", s.auth(s.getBranch))
	mux.HandleFunc("GET /repos/{owner}/{repo}/rules/branches/{branch...}", s.auth(s.getBranchRules))
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", s.getRepoInstallation)
}

type issueIn struct {
	Title  *string   `json:"title"`
	Body   *string   `json:"body"`
	Labels *[]string `json:"labels"`
	State  *string   `json:"state"`
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) {
	var in issueIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.Title == nil || strings.TrimSpace(*in.Title) == "" {
		writeValidation(w, "Issue", "missing_field", "title")
		return
	}
	s.mu.Lock()
	is := &Issue{Number: len(s.issues) + 1, Repo: repoOf(r), Title: *in.Title, State: "open"}
	if in.Body != nil {
		is.Body = *in.Body
	}
	if in.Labels != nil {
		is.Labels = append(is.Labels, *in.Labels...)
	}
	s.issues = append(s.issues, is)
	out := s.issueJSON(is)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) editIssue(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in issueIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, is := range s.issues {
		if is.Repo == repoOf(r) && is.Number == n {
			if in.Title != nil {
				is.Title = *in.Title
			}
			if in.Body != nil {
				is.Body = *in.Body
			}
			if in.State != nil {
				is.State = *in.State
			}
			if in.Labels != nil {
				is.Labels = append([]string(nil), *in.Labels...)
			}
			is.Edits++
			writeJSON(w, http.StatusOK, s.issueJSON(is))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
}

// listIssues filters by labels (all must match) and state (open, closed,
// all; default open), and pages with per_page/page.
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want []string
	if l := q.Get("labels"); l != "" {
		want = strings.Split(l, ",")
	}
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	perPage, page := 30, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	s.mu.Lock()
	var all []map[string]any
	for _, is := range s.issues {
		if is.Repo != repoOf(r) || (state != "all" && is.State != state) || !hasAll(is.Labels, want) {
			continue
		}
		all = append(all, s.issueJSON(is))
	}
	s.mu.Unlock()
	lo := min((page-1)*perPage, len(all))
	hi := min(lo+perPage, len(all))
	if hi < len(all) {
		w.Header().Set("Link", "<"+s.URL+r.URL.Path+"?page="+strconv.Itoa(page+1)+">; rel=\"next\"")
	}
	out := all[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(h, w) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (s *Server) issueJSON(is *Issue) map[string]any {
	labels := []map[string]any{}
	for _, l := range is.Labels {
		labels = append(labels, map[string]any{"name": l})
	}
	return map[string]any{
		"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State, "labels": labels,
		"html_url": s.URL + "/" + is.Repo + "/issues/" + strconv.Itoa(is.Number),
		"user":     map[string]any{"login": AppSlug + "[bot]", "type": "Bot"},
	}
}

func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) {
	repo := repoOf(r)
	s.mu.Lock()
	st := s.repos[repo]
	private := st != nil && st.private
	defaultBranch := st.defaultBranchName()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"full_name": repo, "name": r.PathValue("repo"), "owner": map[string]any{"login": r.PathValue("owner")},
		"private": private, "visibility": map[bool]string{true: "private", false: "public"}[private], "default_branch": defaultBranch,
	})
}

// getRepoInstallation answers the app-JWT call GET /repos/{o}/{r}/installation.
func (s *Server) getRepoInstallation(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	if err := verifyAppJWT(strings.TrimPrefix(auth, "Bearer "), &s.Key.PublicKey, AppID, time.Now()); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": InstallationID, "account": map[string]any{"login": r.PathValue("owner")}})
}
