package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"
)

var (
	shaPattern       = regexp.MustCompile(`^[0-9a-f]{40}$`)
	checkStatuses    = map[string]bool{"queued": true, "in_progress": true, "completed": true}
	checkConclusions = map[string]bool{"action_required": true, "cancelled": true, "failure": true, "neutral": true,
		"success": true, "skipped": true, "timed_out": true}
)

// Limits GitHub enforces on check runs.
const (
	maxOutputChars    = 65535
	maxAnnotations    = 50
	maxActions        = 3
	maxActionLabel    = 20
	maxActionDesc     = 40
	maxActionIdent    = 20
	checkRunsResource = "CheckRun"
)

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	name, _ := in["name"].(string)
	if name == "" {
		writeValidation(w, checkRunsResource, "missing_field", "name")
		return
	}
	sha, _ := in["head_sha"].(string)
	if !shaPattern.MatchString(sha) {
		writeValidation(w, checkRunsResource, "invalid", "head_sha")
		return
	}
	if field, msg := validateCheckRun(in); field != "" {
		writeValidationMsg(w, checkRunsResource, field, msg)
		return
	}
	s.mu.Lock()
	s.nextID++
	cr := &CheckRun{ID: s.nextID, Repo: repoOf(r), Name: name, HeadSHA: sha, Status: "queued"}
	apply(cr, in)
	s.checkRuns[cr.ID] = cr
	s.checkOrder = append(s.checkOrder, cr.ID)
	out := checkRunJSON(cr)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	// go-github v62 sends "name" on every update; an empty one would blank
	// the run's name, which GitHub rejects.
	if v, ok := in["name"]; ok {
		if n, _ := v.(string); n == "" {
			writeValidation(w, checkRunsResource, "invalid", "name")
			return
		}
	}
	if field, msg := validateCheckRun(in); field != "" {
		writeValidationMsg(w, checkRunsResource, field, msg)
		return
	}
	s.mu.Lock()
	cr, ok := s.checkRuns[id]
	if !ok || cr.Repo != repoOf(r) {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	apply(cr, in)
	out := checkRunJSON(cr)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// validateCheckRun returns the offending field and GitHub-like message, or "".
func validateCheckRun(in map[string]any) (string, string) {
	status, hasStatus := in["status"].(string)
	if hasStatus && !checkStatuses[status] {
		return "status", fmt.Sprintf("%q is not a valid status", status)
	}
	conclusion, hasConclusion := in["conclusion"].(string)
	if hasConclusion && !checkConclusions[conclusion] {
		return "conclusion", fmt.Sprintf("%q is not a valid conclusion", conclusion)
	}
	if hasStatus && status == "completed" && !hasConclusion {
		return "conclusion", "conclusion is required when status is completed"
	}
	if hasConclusion && hasStatus && status != "completed" {
		return "status", "status must be completed when a conclusion is given"
	}
	if out, ok := in["output"].(map[string]any); ok {
		title, _ := out["title"].(string)
		summary, hasSummary := out["summary"].(string)
		if title == "" || !hasSummary {
			return "output", "output needs a title and a summary"
		}
		if n := utf8.RuneCountInString(summary); n > maxOutputChars {
			return "output.summary", fmt.Sprintf("summary is too long (maximum is %d characters, got %d)", maxOutputChars, n)
		}
		if text, _ := out["text"].(string); utf8.RuneCountInString(text) > maxOutputChars {
			return "output.text", fmt.Sprintf("text is too long (maximum is %d characters)", maxOutputChars)
		}
		if anns, _ := out["annotations"].([]any); len(anns) > maxAnnotations {
			return "output.annotations", fmt.Sprintf("at most %d annotations per request", maxAnnotations)
		}
	}
	if v, ok := in["actions"]; ok {
		actions, _ := v.([]any)
		if len(actions) > maxActions {
			return "actions", fmt.Sprintf("at most %d actions, got %d", maxActions, len(actions))
		}
		for i, a := range actions {
			m, _ := a.(map[string]any)
			for _, lim := range []struct {
				key string
				max int
			}{{"label", maxActionLabel}, {"description", maxActionDesc}, {"identifier", maxActionIdent}} {
				v, _ := m[lim.key].(string)
				if v == "" || utf8.RuneCountInString(v) > lim.max {
					return fmt.Sprintf("actions[%d].%s", i, lim.key), fmt.Sprintf("%s is required and at most %d characters", lim.key, lim.max)
				}
			}
		}
	}
	return "", ""
}

func apply(cr *CheckRun, in map[string]any) {
	if v, ok := in["name"].(string); ok {
		cr.Name = v
	}
	if v, ok := in["external_id"].(string); ok {
		cr.ExternalID = v
	}
	status, _ := in["status"].(string)
	if c, ok := in["conclusion"].(string); ok {
		cr.Conclusion = c
		status = "completed" // GitHub completes a run given a conclusion
	}
	if status != "" {
		cr.Status = status
		cr.Statuses = append(cr.Statuses, status)
	} else if len(cr.Statuses) == 0 {
		cr.Statuses = append(cr.Statuses, cr.Status)
	}
	if out, ok := in["output"].(map[string]any); ok {
		cr.Title, _ = out["title"].(string)
		cr.Summary, _ = out["summary"].(string)
		cr.Text, _ = out["text"].(string)
		if anns, ok := out["annotations"].([]any); ok {
			for _, a := range anns {
				if m, ok := a.(map[string]any); ok {
					cr.Annotations = append(cr.Annotations, m)
				}
			}
		}
	}
	if acts, ok := in["actions"].([]any); ok {
		cr.Actions = nil
		for _, a := range acts {
			if m, ok := a.(map[string]any); ok {
				cr.Actions = append(cr.Actions, m)
			}
		}
	}
}

func checkRunJSON(cr *CheckRun) map[string]any {
	out := map[string]any{
		"id": cr.ID, "name": cr.Name, "head_sha": cr.HeadSHA, "external_id": cr.ExternalID, "status": cr.Status,
		"output":   map[string]any{"title": cr.Title, "summary": cr.Summary, "text": cr.Text},
		"html_url": fmt.Sprintf("https://github.com/%s/runs/%d", cr.Repo, cr.ID),
		"app":      map[string]any{"id": AppID, "slug": AppSlug},
	}
	if cr.Conclusion != "" {
		out["conclusion"] = cr.Conclusion
	}
	return out
}
