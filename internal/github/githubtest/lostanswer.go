package githubtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// LoseAnswerNext makes the next n calls of method to path take effect —
// the fake applies them as usual — and then answer 502 instead of what
// they did, as when GitHub's front end times out on a write its back end
// finished, or a connection drops after the request was read. A client that
// blindly sends again makes a second check run or comment; one that looks
// the effect up first does not.
func (s *Server) LoseAnswerNext(method, path string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = append(s.lost, &failure{method: method, path: path, times: n, status: http.StatusBadGateway,
		body: `{"message":"Server Error","documentation_url":"https://docs.github.com/rest"}`})
}

// AnswersLost counts the calls whose effect was applied and whose answer
// was replaced by a 502.
func (s *Server) AnswersLost() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answersLost
}

// takeLost returns the lost-answer script matching the call, or nil;
// s.mu is held.
func (s *Server) takeLost(method, path string) *failure {
	for i, f := range s.lost {
		if f.method == method && f.path == path && f.times > 0 {
			f.times--
			if f.times == 0 {
				s.lost = append(s.lost[:i], s.lost[i+1:]...)
			}
			s.answersLost++
			return f
		}
	}
	return nil
}

// applyThenLose runs the real handler into a recorder that nobody reads,
// then answers the failure.
func applyThenLose(next http.Handler, w *statusRecorder, r *http.Request, f *failure) {
	next.ServeHTTP(discard{header: http.Header{}}, r)
	writeRaw(w, f.status, f.body)
}

// listComments answers GET /repos/{o}/{r}/issues/{number}/comments in
// creation order, paged with per_page/page and a Link header, each comment
// with its author (the app's bot) as GitHub shows it.
func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	perPage, page := paging(r)
	s.mu.Lock()
	var all []map[string]any
	for _, c := range s.comments {
		if c.Repo != repoOf(r) || c.Number != n {
			continue
		}
		all = append(all, map[string]any{
			"id": c.ID, "body": c.Body, "html_url": fmt.Sprintf("%s/%s/pull/%d#issuecomment-%d", s.URL, c.Repo, n, c.ID),
			"user": map[string]any{"login": AppSlug + "[bot]", "type": "Bot", "id": 31337001},
		})
	}
	s.mu.Unlock()
	lo := min((page-1)*perPage, len(all))
	hi := min(lo+perPage, len(all))
	if hi < len(all) {
		w.Header().Set("Link", "<"+s.URL+r.URL.Path+"?per_page="+strconv.Itoa(perPage)+"&page="+strconv.Itoa(page+1)+">; rel=\"next\"")
	}
	out := all[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

// Reactions counts the reactions of content on issue comment id (GitHub
// keeps one per user and content, so a second POST does not add one).
func (s *Server) Reactions(repo string, commentID int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	prefix := fmt.Sprintf("%s:%d:", repo, commentID)
	for k := range s.reactions {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
	}
	return out
}

// StallAll makes every API call wait, recorded but unanswered, until
// release is called (or the caller gives up): a GitHub that accepted the
// connection and hangs, so a test can kill a server in the middle of a
// call.
func (s *Server) StallAll() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.stall = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.stall == ch {
				s.stall = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// discard is a response nobody reads: the effect of a call whose answer is
// lost.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
