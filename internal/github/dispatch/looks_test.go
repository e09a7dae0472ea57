package dispatch

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/store"

	"github.com/perfgate/perfgate/internal/vocab/result"
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

// A maintainer's retest after the plan's last look starts a new plan, with
// α of its own, on all the evidence: the check says so, and the pull
// request's false-alarm bound with it.
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
	looks := doc.Looks["quick"]
	if doc.Report == nil || looks.Rounds() != 2 || len(looks.Spent) != 1 || doc.Report.CandidateRuns <= last.Report.CandidateRuns {
		t.Errorf("after a third retest: report %+v, looks %+v; want a verdict on all the runs under plan 2", doc.Report, looks)
	}
	if c := l.check(id); !strings.Contains(c.Summary, "plan 2 (a retest after plan 1's last look; this pull request's false-alarm bound is now") {
		t.Errorf("the check does not state the new plan (%s):\n%s", c.Conclusion, c.Summary)
	}
}

// Looks spent with no verdict stored (extensions that measured nothing
// spent them) never leave a pull request without a verdict: the evidence
// is judged again at the last look's levels, spending nothing — before,
// the check ended "could not run: the looks … are spent and no verdict is
// stored".
func TestSpentLooksWithoutAVerdict(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	l.request(headSHA, false)
	l.runAll()
	l.request(headSHA, true)
	l.runAll()
	row := l.row(headSHA)
	doc := l.doc(headSHA)
	spent := len(doc.Looks["quick"].Spent)
	doc.Report = nil
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.st.TransitionCheckRun(l.ctx, row.ID, row.State, store.CheckTransition{State: row.State, Verdict: raw, Deadline: row.Deadline}); err != nil || !ok {
		t.Fatalf("clear the stored verdict: %v %v", ok, err)
	}
	l.request(headSHA, true)
	l.failJob(l.claim(), "the runner lost its card")
	after := l.doc(headSHA)
	if after.Report == nil || len(after.Looks["quick"].Spent) != spent || after.Looks["quick"].Rounds() != 1 {
		t.Errorf("spent looks, no verdict: report %+v, looks %+v; want a verdict at the last look's levels and no look spent", after.Report, after.Looks["quick"])
	}
	if strings.Contains(string(l.row(headSHA).Verdict), "no verdict is stored") {
		t.Error("the check still says no verdict is stored")
	}
}
