package demo

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
)

// TestAppealFlow: a warned regression; a read-only user's retest is
// refused and runs nothing; the author appeals, which re-measures on the
// same card and adds the runs to the evidence; a maintainer accepts, the
// check turns green, and every step is in the audit log.
func TestAppealFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine three times")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	h, err := Start(ctx, t.TempDir(), zerolog.Nop(), WithPerfgate(perfgateBin), WithSlowdown(1.3))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, _, err := h.PromoteBaseline(ctx); err != nil {
		t.Fatal(err)
	}
	deliver := func(event, name, id string) {
		t.Helper()
		code, err := h.Deliver(ctx, event, name, id)
		if err != nil || code/100 != 2 {
			t.Fatalf("deliver %s: %d %v", name, code, err)
		}
	}
	if code, err := h.DeliverPR(ctx, "opened", slowPR, "d-1"); err != nil || code/100 != 2 {
		t.Fatalf("deliver PR #17: %d %v", code, err)
	}
	warn, err := h.WaitCheck(ctx, "the first check to complete", func(c githubtest.CheckRun) bool { return c.Status == "completed" })
	if err != nil {
		t.Fatal(err)
	}
	if warn.Conclusion != "neutral" {
		t.Fatalf("first verdict %q, want neutral warning:\n%s", warn.Conclusion, warn.Summary)
	}
	jobsBefore := jobCount(ctx, t, h)

	// monalisa has read access only: her /perf retest is refused.
	h.GitHub.SetPermission(repo, "monalisa", "read", "read")
	deliver("issue_comment", "issue_comment/created.retest.json", "d-2")
	waitComment(ctx, t, h, "needs write access")
	if n := jobCount(ctx, t, h); n != jobsBefore {
		t.Errorf("a refused retest queued %d job(s)", n-jobsBefore)
	}

	// The author appeals: recorded, re-measured (3 more runs on the same card).
	deliver("issue_comment", "issue_comment/created.appeal.json", "d-3")
	waitComment(ctx, t, h, "Appeal recorded")
	retest, err := h.WaitCheck(ctx, "the retest's check to complete", func(c githubtest.CheckRun) bool { return c.ID != warn.ID && c.Status == "completed" })
	if err != nil {
		t.Fatal(err)
	}
	// The appeal's 3 runs join the first job's 3 (6 from 2 sessions); a
	// noisy machine's look may add a settling job's runs to either.
	m := evidenceRe.FindStringSubmatch(retest.Summary)
	if retest.Conclusion != "neutral" || m == nil || atoi(m[1]) < 6 || atoi(m[2]) < 2 {
		t.Errorf("retest after appeal: %s, want neutral on at least 6 runs from at least 2 sessions (%q):\n%s", retest.Conclusion, m, retest.Summary)
	}

	// A maintainer accepts.
	h.GitHub.SetPermission(repo, "monalisa", "admin", "admin")
	deliver("issue_comment", "issue_comment/created.appeal_accept.json", "d-4")
	waitComment(ctx, t, h, "Appeal accepted")
	acc, err := h.WaitCheck(ctx, "the retest's check to pass after the upheld appeal", func(c githubtest.CheckRun) bool { return c.ID == retest.ID && c.Conclusion == "success" })
	if err != nil {
		t.Fatalf("accepted appeal did not turn the check green: %v", err)
	}
	if !strings.Contains(acc.Title, "accepted") {
		t.Errorf("accepted check title %q", acc.Title)
	}
	audit, err := h.Store.ListAudit(ctx, repo, slowPR)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range audit {
		seen[e.Action] = true
	}
	for _, a := range []string{"run.requested", "gate.regression", "appeal.opened", "appeal.accepted"} {
		if !seen[a] {
			t.Errorf("audit log lacks %q (has %v)", a, seen)
		}
	}
	// The baseline does not move on an accepted appeal.
	if hist, err := h.Store.BaselineHistory(ctx, repo, "quick"); err != nil || len(hist) != 1 {
		t.Errorf("baseline history after accept: %d versions, %v; want 1", len(hist), err)
	}
}

// evidenceRe reads the check's evidence line: its candidate runs and the
// sessions (jobs) they came from.
var evidenceRe = regexp.MustCompile(`vs (\d+) candidate run\(s\) from (\d+) sessions`)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func jobCount(ctx context.Context, t *testing.T, h *Harness) int {
	t.Helper()
	jobs, err := h.Store.ListJobs(ctx, store.JobFilter{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

func waitComment(ctx context.Context, t *testing.T, h *Harness, substr string) {
	t.Helper()
	found := func() bool {
		for _, c := range h.GitHub.Comments() {
			if strings.Contains(c.Body, substr) {
				return true
			}
		}
		return false
	}
	if poll.UntilContext(ctx, found) == nil {
		return
	}
	var bodies []string
	for _, c := range h.GitHub.Comments() {
		bodies = append(bodies, c.Body)
	}
	t.Fatalf("no PR comment containing %q; comments:\n%s", substr, strings.Join(bodies, "\n---\n"))
}
