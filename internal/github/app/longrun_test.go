package app

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// `/perf capacity` and `/perf soak` are for maintainers; they queue their
// tier's check run when the config has the section and say so when it
// does not.
func TestLongRunCommands(t *testing.T) {
	h := newHarness(t)
	h.command(t, "monalisa", "/perf capacity")
	if got := h.lastComment(t); !strings.Contains(got, "has no `capacity:` section") || len(h.disp.Runs()) != 0 {
		t.Errorf("capacity without the section: %q (%d runs)", got, len(h.disp.Runs()))
	}
	h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("capacity:\n  slo: {ttft_ms: 500}\nsoak:\n  duration: 2h\n"))
	h.gh.SetPermission(repoName, "octocat", "write", "write")
	h.command(t, "octocat", "/perf soak")
	if got := h.lastComment(t); !strings.Contains(got, "needs the maintain or admin role") || len(h.disp.Runs()) != 0 {
		t.Errorf("soak by a writer: %q (%d runs)", got, len(h.disp.Runs()))
	}
	for i, tc := range []struct {
		body  string
		tier  check.Tier
		reply string
	}{
		{"/perf capacity", check.TierCapacity, "Queued `perfgate / capacity`"},
		{"/perf soak", check.TierSoak, "Queued `perfgate / soak`"},
	} {
		h.command(t, "monalisa", tc.body)
		if got := h.lastComment(t); !strings.Contains(got, tc.reply) {
			t.Errorf("%s: %q", tc.body, got)
		}
		runs := h.disp.Runs()
		if len(runs) != i+1 {
			t.Fatalf("%s: %d runs requested", tc.body, len(runs))
		}
		if r := runs[i]; r.Tier != tc.tier || r.PR != prNumber || r.HeadSHA != headSHA || r.BaseSHA == "" || r.Trigger != tc.body || r.Config == nil || !longRunOn(r.Config, tc.tier) {
			t.Errorf("%s: run %+v", tc.body, r)
		}
	}
}

// The Retest button on a long-run check re-runs it for a maintainer only.
func TestLongRunRetestButton(t *testing.T) {
	h := newHarness(t)
	h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("capacity:\n  slo: {ttft_ms: 500}\n"))
	h.gh.SetPermission(repoName, "octocat", "write", "write")
	h.press(t, "octocat", "retest", "perfgate / capacity", headSHA)
	if got := h.lastComment(t); !strings.Contains(got, "needs the maintain or admin role") || len(h.disp.Runs()) != 0 {
		t.Errorf("retest of capacity by a writer: %q (%d runs)", got, len(h.disp.Runs()))
	}
	h.press(t, "monalisa", "retest", "perfgate / capacity", headSHA)
	if runs := h.disp.Runs(); len(runs) != 1 || runs[0].Tier != check.TierCapacity || runs[0].HeadSHA != headSHA {
		t.Errorf("retest of capacity by a maintainer: runs %+v", runs)
	}
}
