package githubtest

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// outage makes every API call (token requests included) fail until it ends.
type outage struct {
	status int
	until  time.Time
	header http.Header
}

// FailAllFor makes every call answer status (e.g. 502) for d from now, as
// GitHub does in an incident; calls are still recorded.
func (s *Server) FailAllFor(status int, d time.Duration, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = &outage{status: status, until: time.Now().Add(d), header: header}
}

// EndOutage ends a FailAllFor early.
func (s *Server) EndOutage() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = nil
}

// outageFailure returns the failure to answer now, or nil.
func (s *Server) outageFailure() *failure {
	if s.outage == nil {
		return nil
	}
	if time.Now().After(s.outage.until) {
		s.outage = nil
		return nil
	}
	return &failure{status: s.outage.status, header: s.outage.header,
		body: fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, http.StatusText(s.outage.status))}
}

// RevokeTokens makes every installation token issued so far invalid, as
// when an app is reinstalled or its key rotated: calls with them get 401.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok := range s.tokens {
		delete(s.tokens, tok)
	}
}

// TokensIssued counts the installation tokens the fake has handed out.
func (s *Server) TokensIssued() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/access_tokens") && r.Status == http.StatusCreated {
			n++
		}
	}
	return n
}

// listCheckRunsForRef answers GET /repos/{o}/{r}/commits/{ref}/check-runs
// (check_name filters; all runs, newest first, as filter=all does).
func (s *Server) listCheckRunsForRef(w http.ResponseWriter, r *http.Request) {
	ref, name := r.PathValue("ref"), r.URL.Query().Get("check_name")
	s.mu.Lock()
	var runs []map[string]any
	for i := len(s.checkOrder) - 1; i >= 0; i-- {
		cr := s.checkRuns[s.checkOrder[i]]
		if cr.Repo != repoOf(r) || cr.HeadSHA != ref || (name != "" && cr.Name != name) {
			continue
		}
		runs = append(runs, checkRunJSON(cr))
	}
	s.mu.Unlock()
	if runs == nil {
		runs = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}
