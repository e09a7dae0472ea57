package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// GitHub's cap on the commits GET /pulls/{n}/commits lists.
const maxPRCommits = 250

// TimelineEvent is one event of a pull request's timeline as the fake
// serves it: "committed" with the commit's SHA, or "head_ref_force_pushed"
// (GitHub names the new head in commit_id).
type TimelineEvent struct {
	Event    string
	SHA      string
	CommitID string
}

// SetPullCommits stores the commits GET /repos/{o}/{r}/pulls/{n}/commits
// lists, oldest first. Unset, it lists the stored pull request's head.
func (s *Server) SetPullCommits(repo string, number int, shas []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prCommits[prKey(repo, number)] = shas
}

// SetTimeline stores what GET /repos/{o}/{r}/issues/{n}/timeline lists.
// Unset, it lists one "committed" event per commit of the pull request.
func (s *Server) SetTimeline(repo string, number int, events []TimelineEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timelines[prKey(repo, number)] = events
}

// pullCommits is what the pull request holds now; the lock is held.
func (s *Server) pullCommits(key string) []string {
	if shas, ok := s.prCommits[key]; ok {
		return shas
	}
	var pr struct {
		Head struct {
			SHA string `json:"sha"`
		} `json:"head"`
	}
	if raw, ok := s.pulls[key]; ok && json.Unmarshal(raw, &pr) == nil && pr.Head.SHA != "" {
		return []string{pr.Head.SHA}
	}
	return nil
}

func (s *Server) listPullCommits(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	key := prKey(repoOf(r), n)
	s.mu.Lock()
	_, known := s.pulls[key]
	all := s.pullCommits(key)
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	all = all[:min(len(all), maxPRCommits)]
	out := make([]map[string]any, 0, len(all))
	for _, sha := range all {
		out = append(out, map[string]any{"sha": sha, "url": s.URL + "/repos/" + repoOf(r) + "/commits/" + sha,
			"commit": map[string]any{"message": "commit " + sha[:min(7, len(sha))]}})
	}
	writePage(w, r, out)
}

func (s *Server) listTimeline(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	key := prKey(repoOf(r), n)
	s.mu.Lock()
	events, ok := s.timelines[key]
	if !ok {
		for _, sha := range s.pullCommits(key) {
			events = append(events, TimelineEvent{Event: "committed", SHA: sha})
		}
	}
	s.mu.Unlock()
	out := make([]map[string]any, 0, len(events))
	for i, e := range events {
		m := map[string]any{"event": e.Event, "id": i + 1}
		if e.SHA != "" {
			m["sha"] = e.SHA
		}
		if e.CommitID != "" {
			m["commit_id"] = e.CommitID
		}
		out = append(out, m)
	}
	writePage(w, r, out)
}

// writePage answers one page of items with GitHub's Link header.
func writePage(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	perPage, page := paging(r)
	last := max(1, (len(items)+perPage-1)/perPage)
	start := min((page-1)*perPage, len(items))
	end := min(start+perPage, len(items))
	var links []string
	link := func(p int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		q.Set("per_page", strconv.Itoa(perPage))
		q.Set("page", strconv.Itoa(p))
		u.RawQuery = q.Encode()
		return fmt.Sprintf(`<%s>; rel="%s"`, u.String(), rel)
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	writeJSON(w, http.StatusOK, items[start:end])
}
