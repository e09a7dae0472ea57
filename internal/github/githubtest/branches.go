package githubtest

import (
	"net/http"
	"strings"
)

// SetDefaultBranch sets repo's default branch (GET /repos/{owner}/{repo}
// reports it; "main" unless set).
func (s *Server) SetDefaultBranch(repo, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoState(repo).defaultBranch = branch
}

// SetBranch creates a branch of repo for GET
// /repos/{owner}/{repo}/branches/{branch}, protected or not. The default
// branch exists without being set (unprotected unless set so).
func (s *Server) SetBranch(repo, branch, sha string, protected bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repoState(repo)
	if st.branches == nil {
		st.branches = map[string]branchState{}
	}
	st.branches[branch] = branchState{sha: sha, protected: protected}
}

// SetBranchProtection gives a protected branch its classic protection,
// the body of GET /repos/{owner}/{repo}/branches/{branch}/protection
// (required_pull_request_reviews, restrictions, …). A protected branch
// without one answers that endpoint 403, as GitHub does to an app without
// the administration permission.
func (s *Server) SetBranchProtection(repo, branch string, protection map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repoState(repo)
	if st.branches == nil {
		st.branches = map[string]branchState{}
	}
	b := st.branches[branch]
	b.protection = protection
	st.branches[branch] = b
}

// SetBranchRules sets the active ruleset rules of a branch, the body of
// GET /repos/{owner}/{repo}/rules/branches/{branch} ([] unless set).
func (s *Server) SetBranchRules(repo, branch string, rules []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repoState(repo)
	if st.branches == nil {
		st.branches = map[string]branchState{}
	}
	b := st.branches[branch]
	b.rules = rules
	st.branches[branch] = b
}

type branchState struct {
	sha        string
	protected  bool
	protection map[string]any
	rules      []map[string]any
}

// getBranchRules answers "get rules for a branch".
func (s *Server) getBranchRules(w http.ResponseWriter, r *http.Request) {
	repo, name := repoOf(r), strings.TrimSuffix(r.PathValue("branch"), "/")
	s.mu.Lock()
	var rules []map[string]any
	if st := s.repos[repo]; st != nil {
		rules = st.branches[name].rules
	}
	s.mu.Unlock()
	if rules == nil {
		rules = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, rules)
}

// repoState returns repo's state, creating it; s.mu is held.
func (s *Server) repoState(repo string) *repoState {
	if s.repos == nil {
		s.repos = map[string]*repoState{}
	}
	st, ok := s.repos[repo]
	if !ok {
		st = &repoState{}
		s.repos[repo] = st
	}
	return st
}

func (st *repoState) defaultBranchName() string {
	if st == nil || st.defaultBranch == "" {
		return "main"
	}
	return st.defaultBranch
}

// getBranch answers GitHub's "get a branch": its name, head commit and
// the protected flag; 404 for a branch the repository does not have.
func (s *Server) getBranch(w http.ResponseWriter, r *http.Request) {
	repo, name := repoOf(r), strings.TrimSuffix(r.PathValue("branch"), "/")
	name, protection := strings.CutSuffix(name, "/protection")
	s.mu.Lock()
	st := s.repos[repo]
	b, ok := branchState{}, false
	if st != nil {
		b, ok = st.branches[name]
	}
	if !ok && name == st.defaultBranchName() {
		ok = true
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Branch not found")
		return
	}
	if protection {
		switch {
		case !b.protected:
			writeError(w, http.StatusNotFound, "Branch not protected")
		case b.protection == nil:
			writeError(w, http.StatusForbidden, "Resource not accessible by integration")
		default:
			writeJSON(w, http.StatusOK, b.protection)
		}
		return
	}
	out := map[string]any{
		"name":      name,
		"commit":    map[string]any{"sha": b.sha, "url": s.URL + "/repos/" + repo + "/commits/" + b.sha},
		"protected": b.protected,
		"protection": map[string]any{
			"enabled": b.protected, "required_status_checks": map[string]any{"enforcement_level": "off", "contexts": []string{}},
		},
		"protection_url": s.URL + "/repos/" + repo + "/branches/" + name + "/protection",
		"_links":         map[string]string{"self": s.URL + "/repos/" + repo + "/branches/" + name, "html": s.URL + "/" + repo + "/tree/" + name},
	}
	writeJSON(w, http.StatusOK, out)
}
