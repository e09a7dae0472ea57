package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// noInstallationLog is the one line a delivery without an installation
// leaves.
const noInstallationLog = "delivery without an installation ignored"

// Payloads shaped like GitHub's published examples
// (testdata/webhooks/published, made by generate.py): none fails, none is
// retried. A delivery without an installation is ignored with one log line
// and asks GitHub for nothing; one with old timestamps, nulls or unknown
// fields where perfgate reads nothing is acted on exactly as its ordinary
// twin is; a plain issue's chatter and other apps' checks are ignored.
func TestPublishedShapes(t *testing.T) {
	cases := []struct {
		fixture string // under published/; the folder is the event
		// twin is the ordinary fixture whose handling this one must
		// match; with none, want is the dispatcher's calls.
		twin  string
		want  []string
		reply string // a substring of the one reply; "" for none
	}{
		{fixture: "pull_request/opened.no_installation.json"},
		{fixture: "pull_request/synchronize.no_installation.json"},
		{fixture: "pull_request/closed.no_installation.json"},
		{fixture: "pull_request_review/submitted.no_installation.json"},
		{fixture: "issue_comment/created.retest.no_installation.json"},
		{fixture: "check_run/rerequested.no_installation.json"},
		{fixture: "check_suite/rerequested.no_installation.json"},
		{fixture: "merge_group/checks_requested.no_installation.json"},
		{fixture: "release/published.no_installation.json"},

		{fixture: "check_run/rerequested.old_timestamps.json", twin: "check_run/rerequested.json"},
		{fixture: "pull_request/opened.odd_fields.json", twin: "pull_request/opened.json"},
		{fixture: "pull_request_review/submitted.odd_fields.json", twin: "pull_request_review/submitted.approved.json"},
		{fixture: "issue_comment/created.retest.odd_fields.json", twin: "issue_comment/created.retest.json"},

		{fixture: "issue_comment/created.plain_issue.json"},
		{fixture: "issue_comment/created.plain_issue.retest.json", reply: "acts on a pull request"},
		{fixture: "issue_comment/edited.plain_issue.json"},
		{fixture: "issue_comment/deleted.plain_issue.json"},

		{fixture: "check_run/created.other_app.json"},
		{fixture: "check_run/completed.other_app.json"},
		{fixture: "check_run/rerequested.other_app.json"},
		{fixture: "check_run/requested_action.other_app.json"},
		{fixture: "check_suite/requested.other_app.json"},
		{fixture: "check_suite/completed.other_app.json"},
		{fixture: "check_suite/rerequested.other_app.json"},

		{fixture: "push/branch.json"},
		{fixture: "push/branch.no_installation.json"},
		{fixture: "release/published.no_config.json"},
		{fixture: "release/created.no_config.json"},
		{fixture: "installation/new_permissions_accepted.json"},
		{fixture: "installation/deleted.json"},
	}
	t.Run("every fixture is listed", func(t *testing.T) {
		listed := map[string]bool{}
		for _, c := range cases {
			listed[c.fixture] = true
		}
		files, err := filepath.Glob(filepath.Join(filepath.Join("..", "..", "..", "testdata", "webhooks"), "published", "*", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no published fixtures: %v", err)
		}
		for _, f := range files {
			rel := filepath.ToSlash(strings.TrimPrefix(f, filepath.Join(filepath.Join("..", "..", "..", "testdata", "webhooks"), "published")+string(os.PathSeparator)))
			if !listed[rel] {
				t.Errorf("fixture %s has no case", rel)
			}
		}
	})
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			event, _, _ := strings.Cut(c.fixture, "/")
			got := replayFixture(t, event, "published/"+c.fixture)
			want := outcome{calls: c.want, reply: c.reply}
			if c.twin != "" {
				want = replayFixture(t, event, c.twin)
				if len(want.calls) == 0 {
					t.Fatalf("the twin %s does nothing: it proves nothing", c.twin)
				}
			}
			if strings.Contains(c.fixture, "no_installation") && !strings.HasPrefix(c.fixture, "push/") {
				want.ignored = 1
			}
			if !slices.Equal(got.calls, want.calls) {
				t.Errorf("dispatcher calls %q, want %q", got.calls, want.calls)
			}
			if got.ignored != want.ignored {
				t.Errorf("%d %q log lines, want %d", got.ignored, noInstallationLog, want.ignored)
			}
			if want.ignored > 0 && got.githubCalls != 0 {
				t.Errorf("a delivery without an installation made %d GitHub requests", got.githubCalls)
			}
			switch {
			case c.twin != "" && got.reply != want.reply:
				t.Errorf("reply %q, want the twin's %q", got.reply, want.reply)
			case c.twin == "" && c.reply == "" && got.reply != "":
				t.Errorf("unexpected reply %q", got.reply)
			case c.twin == "" && !strings.Contains(got.reply, c.reply):
				t.Errorf("reply %q, want one saying %q", got.reply, c.reply)
			}
		})
	}
}

// outcome is what one delivery made the app do.
type outcome struct {
	calls       []string // the dispatcher's, in order
	reply       string   // the comments' bodies, joined
	ignored     int      // log lines saying the delivery had no installation
	githubCalls int
}

// replayFixture delivers one signed fixture to a fresh app, fails the test
// if its handler failed or it was not answered 2xx, and says what it did.
func replayFixture(t *testing.T, event, fixture string) outcome {
	t.Helper()
	var buf syncBuffer
	h := newHarness(t, func(c *Config) { c.Logger = zerolog.New(&buf) })
	rec := h.deliver(t, event, fixture)
	if rec.Code/100 != 2 {
		t.Errorf("%s: answered %d %s", fixture, rec.Code, rec.Body)
	}
	for _, err := range h.errs {
		if err != nil {
			t.Errorf("%s: the delivery failed: %v", fixture, err)
		}
	}
	var out outcome
	h.disp.mu.Lock()
	out.calls = append(out.calls, h.disp.calls...)
	h.disp.mu.Unlock()
	var bodies []string
	for _, c := range h.comments() {
		bodies = append(bodies, c.Body)
	}
	out.reply = strings.Join(bodies, "\n")
	out.ignored = strings.Count(buf.String(), noInstallationLog)
	out.githubCalls = len(h.gh.Requests())
	return out
}
