package dispatch

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/result"
)

// The look budget belongs to the pull request's code: a commit that
// changes no file (an empty commit, a re-push) continues the budget its
// earlier commit spent, so pushing cannot reset it; a commit that changes
// the code is a new question with a fresh budget.
func TestLooksFollowTheTree(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	withTree := func(tree string) []*result.Result {
		rs := quickRuns(3)
		for _, r := range rs {
			r.Perfgate.Environment.SourceTree = tree
		}
		return rs
	}
	const thirdSHA = "3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c"
	for _, tc := range []struct {
		sha, tree string
		looks     int
	}{
		{headSHA, "sha256:aaaa", 1},
		{newSHA, "sha256:aaaa", 2}, // an empty commit on top
		{thirdSHA, "sha256:bbbb", 1},
	} {
		l.request(tc.sha, false)
		l.succeed(l.claim(), withTree(tc.tree))
		doc := l.doc(tc.sha)
		if got := len(doc.Looks["quick"].Spent); got != tc.looks || doc.Report == nil || doc.Report.Look() != tc.looks {
			t.Errorf("%s (tree %s): %d looks spent, want %d; report %+v", tc.sha[:7], tc.tree, got, tc.looks, doc.Report)
		}
	}
}

// A retest after the plan's last look cannot move the verdict: the check
// concludes as the last look left it and says why.
func TestRetestAfterTheLastLook(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	l.request(headSHA, false)
	l.runAll()
	l.request(headSHA, true) // look 2: the last the quick tier's settle budget pays for
	l.runAll()
	last := l.doc(headSHA)
	if !last.Looks["quick"].Final() || last.Report == nil {
		t.Fatalf("after the retest: looks %+v", last.Looks["quick"])
	}
	id := l.request(headSHA, true)
	l.runAll()
	doc := l.doc(headSHA)
	if doc.Report == nil || doc.Report.Verdict != last.Report.Verdict || len(doc.Looks["quick"].Spent) != 2 {
		t.Errorf("after a third retest: report %+v, looks %+v; want the last verdict and no new look", doc.Report, doc.Looks["quick"])
	}
	if c := l.check(id); !strings.Contains(c.Summary, "all looks of this pull request's plan are spent") || c.Conclusion == "failure" {
		t.Errorf("the check does not say the plan is spent (%s):\n%s", c.Conclusion, c.Summary)
	}
}
