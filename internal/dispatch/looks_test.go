package dispatch

import (
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
