package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// fakeApprovals remembers approved commits, as the store does, and the
// heads perfgate recorded for PR #17.
type fakeApprovals struct {
	mu       sync.Mutex
	approved map[string]request.Approval
	heads    []request.SeenHead
}

func (f *fakeApprovals) Heads(ctx context.Context, repo string, pr int) ([]request.SeenHead, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request.SeenHead(nil), f.heads...), nil
}

func (f *fakeApprovals) Approve(ctx context.Context, a request.Approval) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := a.Owner + "/" + a.Repo + "@" + a.HeadSHA
	if _, ok := f.approved[k]; !ok {
		f.approved[k] = a
	}
	return nil
}

func (f *fakeApprovals) Approved(ctx context.Context, repo, sha string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.approved[repo+"@"+sha]
	return ok, nil
}

func (f *fakeApprovals) list() []request.Approval {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []request.Approval
	for _, a := range f.approved {
		out = append(out, a)
	}
	return out
}

// fakeAcks answers `/perf ack` with the tiers it holds.
type fakeAcks struct {
	mu    sync.Mutex
	tiers []check.Tier
	acks  []request.Ack
}

func (f *fakeAcks) Ack(ctx context.Context, a request.Ack) ([]check.Tier, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, a)
	out := f.tiers
	f.tiers = nil
	return out, nil
}

// trustHarness is the app with approvals and acks, on a fork's PR #17
// (head 9f4c3e1 in forker/inference) whose repository's config says
// triggers.forks: forks.
func trustHarness(t *testing.T, forks string) (*harness, *fakeApprovals, *fakeAcks) {
	t.Helper()
	// The fork's head was recorded long before any comment of the tests.
	appr := &fakeApprovals{approved: map[string]request.Approval{}, heads: []request.SeenHead{{SHA: headSHA, First: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	acks := &fakeAcks{}
	h := newHarness(t)
	a, err := New(h.app.cfg, Deps{Dispatcher: h.disp, Inbox: h.inbox, Outbox: h.out, Appeals: h.appeals, Approvals: appr, Acks: acks})
	if err != nil {
		t.Fatal(err)
	}
	h.app = a
	h.setPR(t, "pull_request/opened.fork.json", nil)
	if forks != "" {
		h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("triggers:\n  forks: "+forks+"\n"))
	}
	return h, appr, acks
}

// payload reads a fixture and lets edit change its decoded JSON.
func payload(t *testing.T, fixture string, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ghtest.Fixture(t, fixture), &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setPR makes GET /pulls/17 answer the fixture's pull_request, edited.
func (h *harness) setPR(t *testing.T, fixture string, edit func(pr map[string]any)) {
	t.Helper()
	var pr json.RawMessage
	b := payload(t, fixture, func(m map[string]any) {
		if edit != nil {
			edit(m["pull_request"].(map[string]any))
		}
	})
	var ev struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	pr = ev.PullRequest
	h.gh.SetPullRequest(repoName, prNumber, pr)
}

// deliverRaw sends a signed payload and processes it.
func (h *harness) deliverRaw(t *testing.T, event string, body []byte) {
	t.Helper()
	h.n++
	req, err := githubtest.NewDelivery("http://perfgate.test"+hookPath, event, fmt.Sprintf("raw-%s-%d", t.Name(), h.n), body, []byte(githubtest.WebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	h.app.Handler().ServeHTTP(httptest.NewRecorder(), req)
	h.process(t)
}

// comment delivers `/perf …` by user.
func (h *harness) command(t *testing.T, user, body string) {
	t.Helper()
	h.deliverRaw(t, "issue_comment", payload(t, "issue_comment/created.retest.json", func(m map[string]any) {
		c := m["comment"].(map[string]any)
		c["body"] = body
		c["user"].(map[string]any)["login"] = user
		m["sender"].(map[string]any)["login"] = user
	}))
}

// press delivers a press of a button on perfgate's check of sha.
func (h *harness) press(t *testing.T, user, button, check, sha string) {
	t.Helper()
	h.deliverRaw(t, "check_run", payload(t, "check_run/requested_action.retest.json", func(m map[string]any) {
		m["requested_action"] = map[string]any{"identifier": button}
		m["check_run"].(map[string]any)["head_sha"] = sha
		m["check_run"].(map[string]any)["name"] = check
		m["sender"].(map[string]any)["login"] = user
	}))
}

func (h *harness) lastComment(t *testing.T) string {
	t.Helper()
	cs := h.comments()
	if len(cs) == 0 {
		t.Fatal("no comment posted")
	}
	return cs[len(cs)-1].Body
}

// triggers.forks does what it says: never runs nothing, whatever anyone
// approves; maintainer needs the maintain or admin role; write any writer.
// Without an approval nothing runs, and /perf retest is no approval.
func TestForkPolicies(t *testing.T) {
	type attempt struct {
		role    string // the approver's role_name
		how     string // "comment" or "button"
		wantRun bool
		reply   string
	}
	tests := []struct {
		forks       string
		opened      check.Phase
		openedTitle string
		attempts    []attempt
	}{
		{"never", check.Skipped, "Fork pull requests do not run here", []attempt{
			{"admin", "comment", false, "never runs a fork's code"},
			{"admin", "button", false, "never runs a fork's code"},
		}},
		{"maintainer", check.Waiting, "Waiting for approval", []attempt{
			{"write", "comment", false, "needs the approval of someone with the maintain or admin role"},
			{"write", "button", false, "needs the approval of someone with the maintain or admin role"},
			{"maintain", "comment", true, "Approved commit `9f4c3e1`"},
			{"admin", "button", true, "approved commit `9f4c3e1`"},
		}},
		{"", check.Waiting, "Waiting for approval", []attempt{ // the default is maintainer
			{"write", "comment", false, "maintain or admin role"},
			{"maintain", "comment", true, "Approved commit"},
		}},
		{"write", check.Waiting, "Waiting for approval", []attempt{
			{"read", "comment", false, "needs write access"},
			{"triage", "button", false, "needs the approval of someone with write access"},
			{"write", "comment", true, "Approved commit `9f4c3e1`"},
			{"write", "button", true, "approved commit `9f4c3e1`"},
		}},
	}
	for _, tt := range tests {
		for _, at := range tt.attempts {
			name := fmt.Sprintf("forks=%s/%s by %s", tt.forks, at.how, at.role)
			t.Run(name, func(t *testing.T) {
				h, appr, _ := trustHarness(t, tt.forks)
				h.deliver(t, "pull_request", "pull_request/opened.fork.json")
				c := h.disp.Concluded()
				if len(c) != 1 || c[0].Phase != tt.opened || c[0].Output.Title != tt.openedTitle || len(h.disp.Runs()) != 0 {
					t.Fatalf("fork PR opened: concluded %+v, runs %+v; want one %s check and nothing run", c, h.disp.Runs(), tt.opened)
				}
				// A writer's /perf retest is not an approval.
				h.command(t, "monalisa", "/perf retest")
				if len(h.disp.Runs()) != 0 || !strings.Contains(h.lastComment(t), "nothing was run") {
					t.Fatalf("/perf retest of an unapproved fork commit: runs %+v, reply %q", h.disp.Runs(), h.lastComment(t))
				}

				h.gh.SetPermission(repoName, "monalisa", map[string]string{"read": "read", "triage": "read", "write": "write", "maintain": "write", "admin": "admin"}[at.role], at.role)
				if at.how == "comment" {
					h.command(t, "monalisa", "/perf approve 9f4c3e1")
				} else {
					h.press(t, "monalisa", "approve", "perfgate / quick", headSHA)
				}
				if reply := h.lastComment(t); !strings.Contains(reply, at.reply) {
					t.Errorf("reply %q, want it to say %q", reply, at.reply)
				}
				runs := h.disp.Runs()
				if !at.wantRun {
					if len(runs) != 0 || len(appr.list()) != 0 {
						t.Fatalf("refused approval ran %+v, stored %+v", runs, appr.list())
					}
					return
				}
				if len(runs) != 1 || runs[0].HeadSHA != headSHA || runs[0].Tier != check.TierQuick || !runs[0].Fork {
					t.Fatalf("runs after approval = %+v, want one quick run of the approved fork commit", runs)
				}
				if a := appr.list(); len(a) != 1 || a[0].HeadSHA != headSHA || a[0].By != "monalisa" || a[0].Role != at.role {
					t.Errorf("approvals = %+v", a)
				}
				// Once approved, a writer's retest of the same commit runs.
				h.gh.SetPermission(repoName, "monalisa", "write", "write")
				h.command(t, "monalisa", "/perf retest")
				if runs := h.disp.Runs(); len(runs) != 2 || !runs[1].Confirm || runs[1].HeadSHA != headSHA {
					t.Errorf("retest of the approved commit: runs %+v", runs)
				}
			})
		}
	}
}

// An approval is of the commit the approver saw: a new push waits for a
// new one, and an approval naming an older commit, or a button on an
// older commit's check, runs nothing.
func TestApprovalBoundToSHA(t *testing.T) {
	h, appr, _ := trustHarness(t, "write")
	h.command(t, "monalisa", "/perf approve 9f4c3e1")
	if runs := h.disp.Runs(); len(runs) != 1 || runs[0].HeadSHA != headSHA {
		t.Fatalf("runs = %+v", runs)
	}

	// The fork pushes again.
	h.deliverRaw(t, "pull_request", payload(t, "pull_request/opened.fork.json", func(m map[string]any) {
		m["action"] = "synchronize"
		m["pull_request"].(map[string]any)["head"].(map[string]any)["sha"] = newSHA
	}))
	h.setPR(t, "pull_request/opened.fork.json", func(pr map[string]any) { pr["head"].(map[string]any)["sha"] = newSHA })
	c := h.disp.Concluded()
	if len(h.disp.Runs()) != 1 || len(c) != 1 || c[0].HeadSHA != newSHA || c[0].Phase != check.Waiting || !strings.Contains(c[0].Output.Summary, "/perf approve "+newSHA+"`") {
		t.Fatalf("after a push: runs %+v, concluded %+v; want the new commit waiting for its own approval", h.disp.Runs(), c)
	}

	// Approving the old commit again does not approve the new one.
	h.command(t, "monalisa", "/perf approve 9f4c3e1")
	if reply := h.lastComment(t); !strings.Contains(reply, "is not this pull request's head commit (it is `"+newSHA+"` now)") {
		t.Errorf("reply = %q", reply)
	}
	// Nor does the Approve button on the old commit's check.
	h.press(t, "monalisa", "approve", "perfgate / quick", headSHA)
	if reply := h.lastComment(t); !strings.Contains(reply, "has moved on to `ab12cd3`") {
		t.Errorf("reply = %q", reply)
	}
	// A retest of the new commit is refused until it is approved.
	h.command(t, "monalisa", "/perf retest")
	if len(h.disp.Runs()) != 1 || !strings.Contains(h.lastComment(t), "commit `ab12cd3` comes from a fork and nobody has approved running it") {
		t.Fatalf("retest of the unapproved push: runs %+v, reply %q", h.disp.Runs(), h.lastComment(t))
	}
	if _, ok := appr.approved[repoName+"@"+newSHA]; ok {
		t.Fatal("the new commit was approved by an approval of the old one")
	}
	// The new commit's own approval runs it.
	h.press(t, "monalisa", "approve", "perfgate / quick", newSHA)
	if runs := h.disp.Runs(); len(runs) != 2 || runs[1].HeadSHA != newSHA {
		t.Fatalf("runs = %+v, want the new commit run after its approval", runs)
	}
}

// On a fork's PR an approving review or the merge label is the approval of
// the commit it names, when the reviewer or labeler may approve; when not,
// the merge check waits for an approval.
func TestForkMergeTier(t *testing.T) {
	for _, tc := range []struct {
		name, role string
		wantRun    bool
	}{
		{"maintainer's review approves", "maintain", true},
		{"writer's review does not", "write", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, appr, _ := trustHarness(t, "maintainer")
			h.gh.SetPermission(repoName, "monalisa", "write", tc.role)
			h.deliverRaw(t, "pull_request_review", payload(t, "pull_request_review/submitted.approved.json", func(m map[string]any) {
				m["pull_request"].(map[string]any)["head"].(map[string]any)["repo"].(map[string]any)["full_name"] = "forker/inference"
			}))
			runs := h.disp.Runs()
			if tc.wantRun {
				if len(runs) != 1 || runs[0].Tier != check.TierMerge || len(appr.list()) != 1 || appr.list()[0].Via != "pull_request_review.approved" {
					t.Fatalf("runs %+v, approvals %+v; want the merge tier run on the reviewed commit", runs, appr.list())
				}
				return
			}
			c := h.disp.Concluded()
			if len(runs) != 0 || len(c) != 1 || c[0].Tier != check.TierMerge || c[0].Phase != check.Waiting {
				t.Fatalf("runs %+v, concluded %+v; want a waiting merge check", runs, c)
			}
		})
	}
}

// The config is read from the default branch; a PR's base branch counts
// only when a rule puts what lands on it through review: required
// approving reviews or restricted pushes, by classic protection or a
// ruleset. A writer who pushes a branch with a relaxed .github/perfgate.yml
// and opens a PR against it gains nothing — nor when the branch is
// "protected" only against force pushes.
func TestConfigFromNonProtectedBaseIgnored(t *testing.T) {
	reviews := func(n int) map[string]any {
		return map[string]any{"required_pull_request_reviews": map[string]any{"required_approving_review_count": n}}
	}
	for _, tc := range []struct {
		name       string
		protected  bool
		protection map[string]any   // classic; nil answers 403
		rules      []map[string]any // rulesets
		trusted    bool
	}{
		{"unprotected", false, nil, nil, false},
		{"protected, protection not readable", true, nil, nil, false},
		{"protected against force pushes only", true, map[string]any{"allow_force_pushes": map[string]any{"enabled": false}}, nil, false},
		{"protected with reviews not required", true, reviews(0), nil, false},
		{"protected with a required review", true, reviews(1), nil, true},
		{"protected with restricted pushes", true, map[string]any{"restrictions": map[string]any{"users": []any{}, "teams": []any{}}}, nil, true},
		{"ruleset: no force pushes", false, nil, []map[string]any{{"type": "non_fast_forward"}}, false},
		{"ruleset: pull request without reviews", false, nil, []map[string]any{{"type": "pull_request", "parameters": map[string]any{"required_approving_review_count": 0}}}, false},
		{"ruleset: pull request with a review", false, nil, []map[string]any{{"type": "pull_request", "parameters": map[string]any{"required_approving_review_count": 1}}}, true},
		{"ruleset: restrict updates", false, nil, []map[string]any{{"type": "update"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := trustHarness(t, "maintainer")
			h.gh.SetBranch(repoName, "release-2", headSHA, tc.protected)
			if tc.protection != nil {
				h.gh.SetBranchProtection(repoName, "release-2", tc.protection)
			}
			if tc.rules != nil {
				h.gh.SetBranchRules(repoName, "release-2", tc.rules)
			}
			// The base branch's config lets any writer approve a fork.
			h.gh.SetContent(repoName, "release-2", repoconfig.Path, []byte("triggers:\n  forks: write\n"))
			toRelease := func(pr map[string]any) { pr["base"].(map[string]any)["ref"] = "release-2" }
			h.setPR(t, "pull_request/opened.fork.json", toRelease)
			h.deliverRaw(t, "pull_request", payload(t, "pull_request/opened.fork.json", func(m map[string]any) { toRelease(m["pull_request"].(map[string]any)) }))
			h.gh.SetPermission(repoName, "monalisa", "write", "write")
			h.command(t, "monalisa", "/perf approve 9f4c3e1")

			refs := map[string]bool{}
			for _, r := range h.gh.RequestsTo("GET", "/repos/acme/inference/contents/"+repoconfig.Path) {
				refs[r.Query.Get("ref")] = true
			}
			if tc.trusted {
				if !refs["release-2"] || refs["main"] || len(h.disp.Runs()) != 1 || h.disp.Runs()[0].ConfigRef != "release-2" {
					t.Errorf("reviewed base: config read at %v, runs %+v; want release-2's config (forks: write) to let the writer approve", refs, h.disp.Runs())
				}
				return
			}
			if refs["release-2"] || !refs["main"] {
				t.Errorf("config read at %v; want only main's", refs)
			}
			if len(h.disp.Runs()) != 0 || !strings.Contains(h.lastComment(t), "maintain or admin role") {
				t.Errorf("runs %+v, reply %q; want the writer refused under main's config", h.disp.Runs(), h.lastComment(t))
			}
		})
	}
}

// A non-fork PR needs no approval, and its approve command says so.
func TestApproveOnOwnBranch(t *testing.T) {
	h, _, _ := trustHarness(t, "write")
	h.setPR(t, "pull_request/opened.json", nil)
	h.command(t, "monalisa", "/perf approve 9f4c3e1")
	if !strings.Contains(h.lastComment(t), "runs without an approval") || len(h.disp.Runs()) != 0 {
		t.Errorf("reply %q, runs %+v", h.lastComment(t), h.disp.Runs())
	}
}

// /perf ack needs maintain or admin; it passes what the tier held.
func TestAckCommand(t *testing.T) {
	h, _, acks := trustHarness(t, "")
	h.setPR(t, "pull_request/opened.json", nil)
	h.gh.SetPermission(repoName, "monalisa", "write", "write")
	h.command(t, "monalisa", "/perf ack")
	if !strings.Contains(h.lastComment(t), "needs the maintain or admin role") || len(acks.acks) != 0 {
		t.Fatalf("writer's ack: reply %q, acks %+v", h.lastComment(t), acks.acks)
	}
	h.gh.SetPermission(repoName, "monalisa", "write", "maintain")
	h.command(t, "monalisa", "/perf ack")
	if !strings.Contains(h.lastComment(t), "no check of this pull request waits for an acknowledgement") {
		t.Errorf("ack with nothing held: %q", h.lastComment(t))
	}
	acks.tiers = []check.Tier{check.TierMerge}
	h.command(t, "monalisa", "/perf ack runner noise this week")
	if reply := h.lastComment(t); !strings.Contains(reply, "Acknowledged: `perfgate / merge` passes as inconclusive") {
		t.Errorf("reply %q", reply)
	}
	if a := acks.acks[len(acks.acks)-1]; a.By != "monalisa" || a.HeadSHA != headSHA || a.Reason != "runner noise this week" {
		t.Errorf("ack = %+v", a)
	}
}

// A prefix names a commit only when it can name nothing else: a fork that
// grinds a second commit sharing the prefix of the one a maintainer
// reviewed, and pushes it, gets nothing from `/perf approve <prefix>`. The
// full SHA always names exactly one commit, and the waiting check offers
// it.
func TestApprovePrefixBoundToSeenHead(t *testing.T) {
	const (
		reviewed = "9f4c3e1000000000000000000000000000000000" // what the maintainer saw
		ground   = headSHA                                    // same 7-hex prefix, pushed by the fork
	)
	commented := time.Date(2024, 5, 14, 10, 0, 0, 0, time.UTC) // the fixture comment's created_at
	for _, tc := range []struct {
		name    string
		heads   []request.SeenHead
		comment string
		wantRun bool
		reply   string
	}{
		{"prefix of the only head seen before the comment", []request.SeenHead{{SHA: ground, First: commented.Add(-time.Hour)}}, "/perf approve 9f4c3e1", true, "Approved commit"},
		{"prefix shared with an earlier head", []request.SeenHead{{SHA: reviewed, First: commented.Add(-time.Hour)}, {SHA: ground, First: commented.Add(-time.Minute)}}, "/perf approve 9f4c3e1", false,
			"names more than one commit this pull request has had as its head"},
		{"head pushed after the comment", []request.SeenHead{{SHA: ground, First: commented.Add(time.Second)}}, "/perf approve 9f4c3e1a", false, "became this pull request's head after your comment"},
		{"head not recorded yet", nil, "/perf approve 9f4c3e1", false, "became this pull request's head after your comment"},
		{"full SHA of the head", []request.SeenHead{{SHA: reviewed, First: commented.Add(-time.Hour)}, {SHA: ground, First: commented.Add(time.Second)}}, "/perf approve " + strings.ToUpper(ground), true, "Approved commit"},
		{"full SHA of the reviewed commit", []request.SeenHead{{SHA: reviewed, First: commented.Add(-time.Hour)}, {SHA: ground, First: commented.Add(-time.Minute)}}, "/perf approve " + reviewed, false, "is not this pull request's head commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, appr, _ := trustHarness(t, "write")
			appr.heads = tc.heads
			h.command(t, "monalisa", tc.comment)
			runs := h.disp.Runs()
			if got := len(runs) == 1 && runs[0].HeadSHA == ground; got != tc.wantRun {
				t.Fatalf("runs %+v, reply %q; want run %v", runs, h.lastComment(t), tc.wantRun)
			}
			if _, ok := appr.approved[repoName+"@"+ground]; ok != tc.wantRun {
				t.Fatalf("approvals %+v; want the head approved %v", appr.list(), tc.wantRun)
			}
			reply := h.lastComment(t)
			if !strings.Contains(reply, tc.reply) {
				t.Fatalf("reply %q, want it to say %q", reply, tc.reply)
			}
			if !tc.wantRun && !strings.Contains(reply, "`/perf approve "+ground+"`") && !strings.Contains(reply, "`/perf approve "+headSHA+"`") {
				t.Errorf("reply %q does not offer the full SHA", reply)
			}
		})
	}
}

// Without a record of the heads it saw, the server takes only a full SHA.
func TestApprovePrefixWithoutHeadHistory(t *testing.T) {
	t.Parallel()
	gh := &prHistory{commits: []string{headSHA}, complete: true}
	if _, ok := approvedHead("9f4c3e1", headSHA, nil, gh, false, time.Time{}); ok {
		t.Fatal("a prefix approved without a head history")
	}
	if _, ok := approvedHead(headSHA, headSHA, nil, nil, false, time.Time{}); !ok {
		t.Fatal("the full SHA refused")
	}
}

// When perfgate never got the webhook of the commit the maintainer
// reviewed (an outage, or the app installed after the pull request
// opened), its own record holds only the commit pushed in its place,
// which shares the reviewed commit's prefix. Before, `/perf approve
// <7 hex>` answered "Approved" and queued that other commit; now GitHub's
// list of the pull request's commits and its timeline are asked too, and
// the prefix is refused with the full SHA to use unless it names exactly
// one commit there.
func TestApprovePrefixFirstWebhookMissed(t *testing.T) {
	const (
		reviewed = "9f4c3e1000000000000000000000000000000000" // the first commit: its webhook never came
		ground   = headSHA                                    // same 7-hex prefix, pushed after it
	)
	commented := time.Date(2024, 5, 14, 10, 0, 0, 0, time.UTC)
	onlyGround := []request.SeenHead{{SHA: ground, First: commented.Add(-time.Minute)}}
	for _, tc := range []struct {
		name     string
		commits  []string                   // GitHub's GET /pulls/17/commits
		timeline []githubtest.TimelineEvent // nil: one "committed" per commit
		comment  string
		wantRun  bool
		reply    string
	}{
		{"pushed on top of the reviewed commit", []string{reviewed, ground}, nil, "/perf approve 9f4c3e1", false,
			"names more than one commit of this pull request on GitHub (`" + reviewed + "` and `" + ground + "`)"},
		{"force-pushed over the reviewed commit", []string{ground},
			[]githubtest.TimelineEvent{{Event: "committed", SHA: ground}, {Event: "head_ref_force_pushed", CommitID: ground}},
			"/perf approve 9f4c3e1", false, "branch was force-pushed"},
		{"the reviewed commit only in the timeline", []string{ground},
			[]githubtest.TimelineEvent{{Event: "committed", SHA: reviewed}, {Event: "committed", SHA: ground}},
			"/perf approve 9f4c3e1", false, "names more than one commit of this pull request on GitHub"},
		{"GitHub does not list the head", []string{"0000000000000000000000000000000000000001"}, nil, "/perf approve 9f4c3e1", false,
			"GitHub does not list"},
		{"the full SHA of the head", []string{reviewed, ground}, nil, "/perf approve " + ground, true, "Approved commit"},
		{"installed after the PR opened, one commit", []string{ground}, nil, "/perf approve 9f4c3e1", true, "Approved commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, appr, _ := trustHarness(t, "write")
			appr.heads = onlyGround
			h.gh.SetPullCommits(repoName, prNumber, tc.commits)
			if tc.timeline != nil {
				h.gh.SetTimeline(repoName, prNumber, tc.timeline)
			}
			h.command(t, "monalisa", tc.comment)
			runs := h.disp.Runs()
			reply := h.lastComment(t)
			if got := len(runs) == 1 && runs[0].HeadSHA == ground; got != tc.wantRun {
				t.Fatalf("runs %+v, reply %q; want run %v", runs, reply, tc.wantRun)
			}
			if _, ok := appr.approved[repoName+"@"+ground]; ok != tc.wantRun {
				t.Fatalf("approvals %+v; want the head approved %v", appr.list(), tc.wantRun)
			}
			if !strings.Contains(reply, tc.reply) {
				t.Fatalf("reply %q, want it to say %q", reply, tc.reply)
			}
			if !tc.wantRun && !strings.Contains(reply, "`/perf approve "+ground+"`") {
				t.Errorf("reply %q does not offer the full SHA", reply)
			}
			if len(tc.comment) < len("/perf approve ")+40 {
				if n := len(h.gh.RequestsTo("GET", "/repos/"+repoName+"/pulls/17/commits")); n == 0 {
					t.Error("a prefix was judged without asking GitHub for the pull request's commits")
				}
			}
		})
	}
}

// A merge group holds the queued pull request's code: a fork's runs only
// as the fork policy lets it run anywhere.
func TestMergeGroupForkPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, forks string
		fork        bool
		approved    bool
		verdict     check.Phase // when nothing runs
		says        string
	}{
		{"own branch runs", "never", false, false, "", ""},
		{"fork under forks: never", "never", true, true, check.Skipped, "`triggers.forks: never`"},
		{"unapproved fork head waits", "maintainer", true, false, check.Waiting, "/perf approve " + headSHA + "`"},
		{"approved fork head runs", "maintainer", true, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, appr, _ := trustHarness(t, tc.forks)
			if !tc.fork {
				h.setPR(t, "pull_request/opened.json", nil)
			}
			if tc.approved {
				appr.approved[repoName+"@"+headSHA] = request.Approval{HeadSHA: headSHA}
			}
			h.deliverRaw(t, "merge_group", payload(t, "merge_group/checks_requested.json", nil))
			runs, c := h.disp.Runs(), h.disp.Concluded()
			if tc.verdict == "" {
				if len(runs) != 1 || runs[0].HeadSHA != mergeSHA || len(c) != 0 {
					t.Fatalf("runs %+v, concluded %+v; want the group run", runs, c)
				}
				return
			}
			if len(runs) != 0 || len(c) != 1 || c[0].HeadSHA != mergeSHA || c[0].Phase != tc.verdict || !strings.Contains(c[0].Output.Summary, tc.says) {
				t.Fatalf("runs %+v, concluded %+v; want %s saying %q", runs, c, tc.verdict, tc.says)
			}
		})
	}
}

// The merge label on a fork's PR approves the head the labeled event
// carries — the commit on the PR when the maintainer labelled it — even
// when the PR has moved on by the time the event is handled, and a later
// push waits for a new approval.
func TestForkLabelApprovesHeadAtLabel(t *testing.T) {
	h, appr, _ := trustHarness(t, "maintainer")
	h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("triggers:\n  forks: maintainer\n  merge_label: perfgate/merge-gate\n"))
	h.gh.SetPermission(repoName, "monalisa", "write", "maintain")
	// GitHub already has the next push when perfgate handles the label.
	h.setPR(t, "pull_request/opened.fork.json", func(pr map[string]any) { pr["head"].(map[string]any)["sha"] = newSHA })
	h.deliverRaw(t, "pull_request", payload(t, "pull_request/labeled.json", func(m map[string]any) {
		m["pull_request"].(map[string]any)["head"].(map[string]any)["repo"].(map[string]any)["full_name"] = "forker/inference"
		m["sender"].(map[string]any)["login"] = "monalisa"
	}))
	if runs := h.disp.Runs(); len(runs) != 1 || runs[0].HeadSHA != headSHA || runs[0].Tier != check.TierMerge {
		t.Fatalf("runs %+v; want the merge tier on the labelled head", runs)
	}
	if l := appr.list(); len(l) != 1 || l[0].HeadSHA != headSHA {
		t.Fatalf("approvals %+v; want the labelled head only", l)
	}
	h.deliverRaw(t, "pull_request", payload(t, "pull_request/opened.fork.json", func(m map[string]any) {
		m["action"] = "synchronize"
		m["pull_request"].(map[string]any)["head"].(map[string]any)["sha"] = newSHA
	}))
	if c := h.disp.Concluded(); len(h.disp.Runs()) != 1 || len(c) != 1 || c[0].HeadSHA != newSHA || c[0].Phase != check.Waiting {
		t.Fatalf("after a push: runs %+v, concluded %+v; want the new head waiting", h.disp.Runs(), c)
	}
}
