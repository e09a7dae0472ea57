package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// fakeBisects records what `/perf bisect` asked for and answers as told.
type fakeBisects struct {
	asked []request.Bisect
	err   error
}

func (f *fakeBisects) StartBisect(_ context.Context, r request.Bisect) (request.BisectStarted, error) {
	f.asked = append(f.asked, r)
	if f.err != nil {
		return request.BisectStarted{}, f.err
	}
	return request.BisectStarted{ID: 1, Good: "1111111111111111111111111111111111111111", Bad: "2222222222222222222222222222222222222222",
		Metric: "tpot_p90", Tier: "quick", Commits: 16, Steps: 4, MaxJobs: 24}, nil
}

// commentEvent is the retest fixture with another body and commenter,
// on the pull request or (onPR false) on an issue.
func commentEvent(t *testing.T, body, login string, onPR bool) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(ghtest.Fixture(t, "issue_comment/created.retest.json"), &ev); err != nil {
		t.Fatal(err)
	}
	c := ev["comment"].(map[string]any)
	c["body"] = body
	c["user"].(map[string]any)["login"] = login
	if !onPR {
		issue := ev["issue"].(map[string]any)
		delete(issue, "pull_request")
		issue["number"] = 99
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *harness) deliverBody(t *testing.T, event string, body []byte) {
	t.Helper()
	h.n++
	req, err := githubtest.NewDelivery("http://perfgate.test"+hookPath, event, fmt.Sprintf("delivery-%s-%d", t.Name(), h.n), body, []byte(githubtest.WebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	h.app.Handler().ServeHTTP(httptest.NewRecorder(), req)
	h.process(t)
}

func TestBisectCommand(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		login     string
		onPR      bool
		err       error
		wantReply []string
		wantAsked int
	}{
		{name: "maintainer on an issue", body: "/perf bisect v0.26.0 main", login: "monalisa",
			wantReply: []string{"Bisect started: 16 commits after good `v0.26.0` (`1111111`) up to bad `main` (`2222222`)", "about 4 commits", "at most 24 GPU jobs", "posted here"}, wantAsked: 1},
		{name: "maintainer on a pull request", body: "/perf bisect v0.26.0 main", login: "monalisa", onPR: true,
			wantReply: []string{"Bisect started"}, wantAsked: 1},
		{name: "reader refused", body: "/perf bisect v0.26.0 main", login: "octocat",
			wantReply: []string{"`/perf bisect v0.26.0 main` needs the maintain or admin role; you have read access"}},
		{name: "refusal answered", body: "/perf bisect v9 main", login: "monalisa", err: &request.BisectRefusal{Reason: "GitHub knows no commit, branch or tag `v9`"},
			wantReply: []string{"`/perf bisect v9 main` was not started: GitHub knows no commit, branch or tag `v9`"}, wantAsked: 1},
		{name: "bad usage on an issue answered", body: "/perf bisect main", login: "monalisa",
			wantReply: []string{"got 1"}},
		{name: "a PR's command on an issue", body: "/perf retest", login: "monalisa",
			wantReply: []string{"`/perf retest quick` acts on a pull request, so nothing was run here"}},
		{name: "help on an issue", body: "/perf help", login: "monalisa", wantReply: []string{"/perf bisect <good> <bad>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			fb := &fakeBisects{err: tt.err}
			h.app.deps.Bisects = fb
			for _, hd := range h.app.handlers {
				if ic, ok := hd.(*issueCommentHandler); ok {
					ic.deps.Bisects = fb
				}
			}
			h.deliverBody(t, "issue_comment", commentEvent(t, tt.body, tt.login, tt.onPR))
			for _, err := range h.errs {
				if err != nil {
					t.Fatalf("handler: %v", err)
				}
			}
			want := 99
			if tt.onPR {
				want = prNumber
			}
			cs := h.comments()
			if len(cs) != 1 || cs[0].Number != want || !strings.HasPrefix(cs[0].Body, "@"+tt.login+" ") {
				t.Fatalf("comments %+v, want one reply to @%s on #%d", cs, tt.login, want)
			}
			for _, w := range tt.wantReply {
				if !strings.Contains(cs[0].Body, w) {
					t.Errorf("reply lacks %q:\n%s", w, cs[0].Body)
				}
			}
			if len(fb.asked) != tt.wantAsked {
				t.Fatalf("asked %d bisects, want %d", len(fb.asked), tt.wantAsked)
			}
			if tt.wantAsked > 0 {
				if r := fb.asked[0]; r.Owner+"/"+r.Repo != repoName || r.Number != want || r.By != tt.login || r.InstallationID == 0 {
					t.Errorf("request %+v", r)
				}
			}
			if len(h.disp.Runs()) != 0 {
				t.Errorf("a bisect command queued check runs: %+v", h.disp.Runs())
			}
		})
	}
}
