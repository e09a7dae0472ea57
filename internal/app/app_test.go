package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/githubtest"
)

const (
	repoName  = "acme/inference"
	headSHA   = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"
	newSHA    = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
	mergeSHA  = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f"
	hookPath  = WebhookPath
	prNumber  = 17
	checkPath = "/repos/acme/inference/check-runs"
)

// fakeDispatcher records what the handlers asked for. It is the seam the
// lead fills with the store and queue.
type fakeDispatcher struct {
	mu         sync.Mutex
	runs       []RunRequest
	superseded []string
	calls      []string
	fail       error
}

func (d *fakeDispatcher) RequestRun(ctx context.Context, req RunRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "run:"+req.HeadSHA)
	if d.fail != nil {
		return d.fail
	}
	d.runs = append(d.runs, req)
	return nil
}

func (d *fakeDispatcher) Supersede(ctx context.Context, repo string, pr int, sha string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "supersede:"+sha)
	d.superseded = append(d.superseded, fmt.Sprintf("%s#%d@%s", repo, pr, sha))
	return nil
}

func (d *fakeDispatcher) Runs() []RunRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]RunRequest(nil), d.runs...)
}

type fakeDeliveries struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (f *fakeDeliveries) MarkDelivery(ctx context.Context, id, event string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[id] {
		return false, nil
	}
	f.seen[id] = true
	return true, nil
}

type fakeAppeals struct {
	mu        sync.Mutex
	opened    []Appeal
	decisions []Decision
}

func (f *fakeAppeals) Open(ctx context.Context, a Appeal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, a)
	return nil
}

func (f *fakeAppeals) Decide(ctx context.Context, d Decision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.opened) == 0 {
		return ErrNoOpenAppeal
	}
	f.decisions = append(f.decisions, d)
	return nil
}

type harness struct {
	gh      *githubtest.Server
	app     *App
	disp    *fakeDispatcher
	appeals *fakeAppeals
	n       int
}

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	gh := githubtest.New(t)
	cfg := Config{
		GitHub: gh.AppConfig(),
		Retry:  RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxRateLimitWait: time.Minute, Sleep: func(context.Context, time.Duration) error { return nil }},
		Logger: zerolog.Nop(),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h := &harness{gh: gh, disp: &fakeDispatcher{}, appeals: &fakeAppeals{}}
	a, err := New(cfg, Deps{Dispatcher: h.disp, Deliveries: &fakeDeliveries{seen: map[string]bool{}}, Appeals: h.appeals})
	if err != nil {
		t.Fatal(err)
	}
	h.app = a
	// The PR as GET /pulls/17 returns it: the fixture's pull_request object.
	var ev struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(githubtest.Fixture(t, "pull_request/opened.json"), &ev); err != nil {
		t.Fatal(err)
	}
	gh.SetPullRequest(repoName, prNumber, ev.PullRequest)
	gh.SetFiles(repoName, prNumber, []githubtest.File{{Filename: "README.md"}, {Filename: "model/attention.py"}})
	gh.SetPermission(repoName, "monalisa", "write", "maintain")
	gh.SetPermission(repoName, "octocat", "read", "read")
	return h
}

// deliver sends a signed fixture through App.Handler and waits for the
// async handlers to finish.
func (h *harness) deliver(t *testing.T, event, fixture string) *httptest.ResponseRecorder {
	t.Helper()
	h.n++
	return h.deliverID(t, event, fixture, fmt.Sprintf("delivery-%s-%d", t.Name(), h.n))
}

func (h *harness) deliverID(t *testing.T, event, fixture, id string) *httptest.ResponseRecorder {
	t.Helper()
	req, err := githubtest.NewDelivery("http://perfgate.test"+hookPath, event, id, githubtest.Fixture(t, fixture), []byte(githubtest.WebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.app.Handler().ServeHTTP(rec, req)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.app.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestNewRefusesEmptySecret(t *testing.T) {
	gh := githubtest.New(t)
	cfg := Config{GitHub: gh.AppConfig()}
	cfg.GitHub.App.WebhookSecret = ""
	_, err := New(cfg, Deps{Dispatcher: &fakeDispatcher{}, Deliveries: &fakeDeliveries{}})
	if err == nil || !strings.Contains(err.Error(), "webhook secret is empty") {
		t.Fatalf("err = %v, want a refusal naming the webhook secret", err)
	}
}

func TestDeliveryRejected(t *testing.T) {
	body := githubtest.Fixture(t, "pull_request/opened.json")
	tests := []struct {
		name   string
		limit  int64
		secret []byte
		mangle func(*http.Request)
		want   int
	}{
		{"bad signature", 0, []byte("not-the-secret"), nil, http.StatusUnauthorized},
		{"no signature", 0, nil, nil, http.StatusUnauthorized},
		{"sha1 only", 0, nil, func(r *http.Request) { r.Header.Set("X-Hub-Signature", "sha1=00") }, http.StatusUnauthorized},
		{"body too large", 1024, []byte(githubtest.WebhookSecret), nil, http.StatusRequestEntityTooLarge},
		{"GET", 0, []byte(githubtest.WebhookSecret), func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxBodyBytes = tt.limit })
			req, err := githubtest.NewDelivery("http://perfgate.test"+hookPath, "pull_request", "d-1", body, tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			if tt.mangle != nil {
				tt.mangle(req)
			}
			rec := httptest.NewRecorder()
			h.app.Handler().ServeHTTP(rec, req)
			if err := h.app.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.want {
				t.Errorf("status = %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tt.want)
			}
			if n := len(h.gh.Requests()); n != 0 {
				t.Errorf("rejected delivery reached GitHub with %d calls", n)
			}
		})
	}
}

func TestRedeliveryProcessedOnce(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 2; i++ {
		if rec := h.deliverID(t, "pull_request", "pull_request/opened.json", "same-guid"); rec.Code != http.StatusOK {
			t.Fatalf("delivery %d: status %d", i, rec.Code)
		}
	}
	if n := len(h.disp.Runs()); n != 1 {
		t.Errorf("RequestRun called %d times, want 1", n)
	}
	if n := len(h.gh.CheckRuns()); n != 1 {
		t.Errorf("%d check runs, want 1", n)
	}
}

func TestPullRequestNoMatchingPaths(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFiles(repoName, prNumber, []githubtest.File{{Filename: "docs/index.md"}, {Filename: "models.md"}})
	h.deliver(t, "pull_request", "pull_request/opened.json")
	runs := h.gh.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("%d check runs, want 1", len(runs))
	}
	cr := runs[0]
	if cr.Name != "perfgate / quick" || cr.HeadSHA != headSHA || cr.Status != "completed" || cr.Conclusion != "skipped" {
		t.Errorf("check run = %+v", cr)
	}
	if cr.Summary != "no model/** or inference_engine/** changes" {
		t.Errorf("summary = %q", cr.Summary)
	}
	if n := len(h.disp.Runs()); n != 0 {
		t.Errorf("RequestRun called %d times for an unmatched PR", n)
	}
}

func TestPullRequestMatchingPaths(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		files   []githubtest.File
	}{
		{"opened, match on page 3", "pull_request/opened.json", append(manyFiles(250), githubtest.File{Filename: "inference_engine/kv/cache.cc"})},
		{"renamed out of model/", "pull_request/reopened.json", []githubtest.File{{Filename: "legacy/attn.py", PreviousFilename: "model/attn.py", Status: "renamed"}}},
		{"ready for review", "pull_request/ready_for_review.json", []githubtest.File{{Filename: "model/x.py"}}},
		{"over 3000 files: fail safe", "pull_request/opened.json", manyFiles(3100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.gh.SetFiles(repoName, prNumber, tt.files)
			h.deliver(t, "pull_request", tt.fixture)
			runs := h.gh.CheckRuns()
			if len(runs) != 1 || runs[0].Status != "queued" || runs[0].HeadSHA != headSHA || runs[0].ExternalID != "17" {
				t.Fatalf("check runs = %+v, want one queued on %s with external_id 17", runs, headSHA)
			}
			reqs := h.disp.Runs()
			if len(reqs) != 1 || reqs[0].Tier != TierQuick || reqs[0].HeadSHA != headSHA || reqs[0].CheckRunID != runs[0].ID || reqs[0].PR != prNumber {
				t.Errorf("RequestRun = %+v", reqs)
			}
		})
	}
}

func manyFiles(n int) []githubtest.File {
	out := make([]githubtest.File, n)
	for i := range out {
		out[i] = githubtest.File{Filename: fmt.Sprintf("docs/page%04d.md", i)}
	}
	return out
}

func TestSynchronizeSupersedesFirst(t *testing.T) {
	h := newHarness(t)
	h.deliver(t, "pull_request", "pull_request/synchronize.json")
	want := []string{"supersede:" + newSHA, "run:" + newSHA}
	if fmt.Sprint(h.disp.calls) != fmt.Sprint(want) {
		t.Errorf("calls = %v, want %v", h.disp.calls, want)
	}
}

func TestDraftAndFork(t *testing.T) {
	tests := []struct {
		fixture, conclusion, summary string
	}{
		{"pull_request/opened.draft.json", "skipped", "ready for review"},
		{"pull_request/opened.fork.json", "action_required", "/perf retest"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			h := newHarness(t)
			h.deliver(t, "pull_request", tt.fixture)
			runs := h.gh.CheckRuns()
			if len(runs) != 1 || runs[0].Conclusion != tt.conclusion || !strings.Contains(runs[0].Summary, tt.summary) {
				t.Fatalf("check runs = %+v", runs)
			}
			if len(h.disp.Runs()) != 0 {
				t.Errorf("run requested: %+v", h.disp.Runs())
			}
		})
	}
}

func TestBrokenConfigFailsCheck(t *testing.T) {
	h := newHarness(t)
	h.gh.SetContent(repoName, "main", ConfigPath, []byte("paths: [\"model/***\"]\ntriggers:\n  forks: sometimes\n"))
	h.deliver(t, "pull_request", "pull_request/opened.json")
	runs := h.gh.CheckRuns()
	if len(runs) != 1 || runs[0].Conclusion != "failure" {
		t.Fatalf("check runs = %+v, want one failure", runs)
	}
	for _, want := range []string{`paths[0]: bad glob "model/***": "**" must be a whole path segment`, `triggers.forks: unknown value "sometimes"`} {
		if !strings.Contains(runs[0].Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, runs[0].Summary)
		}
	}
	// Read from the base ref, never the PR's head.
	got := h.gh.RequestsTo("GET", "/repos/acme/inference/contents/"+ConfigPath)
	if len(got) != 1 || got[0].Query.Get("ref") != "main" {
		t.Errorf("config requests = %+v, want one at ref main", got)
	}
	if len(h.disp.Runs()) != 0 {
		t.Error("run requested despite a broken config")
	}
}

func TestCommentCommands(t *testing.T) {
	tests := []struct {
		name       string
		fixture    string
		setup      func(*harness)
		wantReply  string // substring; "" means no comment at all
		wantRuns   int
		wantTier   Tier
		wantDecide int
	}{
		{name: "retest by writer", fixture: "created.retest.json", wantReply: "Re-testing `perfgate / quick`", wantRuns: 1, wantTier: TierQuick},
		{name: "retest merge", fixture: "created.retest_merge.json", wantReply: "Re-testing `perfgate / merge`", wantRuns: 1, wantTier: TierMerge},
		{name: "retest by read-only user refused", fixture: "created.retest.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "read", "read") },
			wantReply: "needs write access to the repository; you have read access"},
		{name: "retest by non-collaborator refused", fixture: "created.retest.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "", "") },
			wantReply: "you have none access"},
		{name: "unknown command", fixture: "created.unknown.json", wantReply: "Unknown command `/perf benchmark`"},
		{name: "help", fixture: "created.help.json", wantReply: "`/perf appeal accept`"},
		{name: "appeal by read-only author", fixture: "created.appeal.json", wantReply: "Appeal recorded", wantRuns: 1, wantTier: TierQuick},
		{name: "accept needs maintain, write refused", fixture: "created.appeal_accept.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "write", "write") },
			wantReply: "needs the maintain or admin role"},
		{name: "accept without an appeal", fixture: "created.appeal_accept.json", wantReply: "no open appeal"},
		{name: "accept by maintainer (legacy permission says write)", fixture: "created.appeal_accept.json",
			setup:     func(h *harness) { h.appeals.opened = []Appeal{{PR: 17}} },
			wantReply: "Appeal accepted", wantDecide: 1},
		{name: "reject with reason", fixture: "created.appeal_reject.json",
			setup:     func(h *harness) { h.appeals.opened = []Appeal{{PR: 17}} },
			wantReply: "> warm-up is part of the SLO", wantDecide: 1},
		{name: "bot ignored", fixture: "created.bot.json"},
		{name: "edit ignored", fixture: "edited.retest.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.setup != nil {
				tt.setup(h)
			}
			h.deliver(t, "issue_comment", "issue_comment/"+tt.fixture)
			comments := h.gh.Comments()
			if tt.wantReply == "" {
				if n := len(h.gh.Requests()); n != 0 {
					t.Errorf("ignored comment caused %d GitHub calls", n)
				}
				return
			}
			if len(comments) != 1 || !strings.Contains(comments[0].Body, tt.wantReply) || comments[0].Number != prNumber {
				t.Fatalf("comments = %+v, want one on #17 containing %q", comments, tt.wantReply)
			}
			if !strings.HasPrefix(comments[0].Body, "@") {
				t.Errorf("reply does not mention the commenter: %q", comments[0].Body)
			}
			var ev struct {
				Comment struct{ ID int64 } `json:"comment"`
			}
			_ = json.Unmarshal(githubtest.Fixture(t, "issue_comment/"+tt.fixture), &ev)
			if !h.gh.HasReaction(repoName, ev.Comment.ID, "eyes") {
				t.Error("no 👀 reaction on the command")
			}
			runs := h.disp.Runs()
			if len(runs) != tt.wantRuns {
				t.Fatalf("RequestRun %d times, want %d", len(runs), tt.wantRuns)
			}
			if tt.wantRuns > 0 && (runs[0].Tier != tt.wantTier || runs[0].HeadSHA != headSHA || !runs[0].Confirm) {
				t.Errorf("run = %+v", runs[0])
			}
			if len(h.appeals.decisions) != tt.wantDecide {
				t.Errorf("decisions = %+v", h.appeals.decisions)
			}
		})
	}
}

func TestMergeTierTriggers(t *testing.T) {
	tests := []struct {
		name, event, fixture, sha string
		setup                     func(*harness)
	}{
		{"merge group", "merge_group", "merge_group/checks_requested.json", mergeSHA, nil},
		{"approving review", "pull_request_review", "pull_request_review/submitted.approved.json", headSHA, nil},
		{"configured label", "pull_request", "pull_request/labeled.json", headSHA, func(h *harness) {
			h.gh.SetContent(repoName, "main", ConfigPath, []byte("triggers:\n  merge_label: perfgate/merge-gate\n"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.setup != nil {
				tt.setup(h)
			}
			h.deliver(t, tt.event, tt.fixture)
			runs := h.disp.Runs()
			if len(runs) != 1 || runs[0].Tier != TierMerge || runs[0].HeadSHA != tt.sha {
				t.Fatalf("runs = %+v, want one merge run on %s", runs, tt.sha)
			}
			crs := h.gh.CheckRuns()
			if len(crs) != 1 || crs[0].Name != "perfgate / merge" || crs[0].HeadSHA != tt.sha {
				t.Errorf("check runs = %+v", crs)
			}
			if runs[0].PR != prNumber {
				t.Errorf("PR = %d, want 17", runs[0].PR)
			}
		})
	}
}

func TestLabelOtherThanConfiguredIgnored(t *testing.T) {
	h := newHarness(t) // default config has no merge label
	h.deliver(t, "pull_request", "pull_request/labeled.json")
	if len(h.disp.Runs()) != 0 || len(h.gh.CheckRuns()) != 0 {
		t.Errorf("label without configuration ran something")
	}
}

func TestCheckRunActions(t *testing.T) {
	tests := []struct {
		name, fixture string
		wantRuns      int
		wantComment   string
	}{
		{"rerequested", "check_run/rerequested.json", 1, ""},
		{"retest button", "check_run/requested_action.retest.json", 1, ""},
		{"appeal button", "check_run/requested_action.appeal.json", 0, "/perf appeal <reason>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.deliver(t, "check_run", tt.fixture)
			runs := h.disp.Runs()
			if len(runs) != tt.wantRuns {
				t.Fatalf("runs = %+v", runs)
			}
			if tt.wantRuns > 0 && (runs[0].Tier != TierQuick || runs[0].HeadSHA != headSHA || runs[0].PR != prNumber) {
				t.Errorf("run = %+v", runs[0])
			}
			if tt.wantComment != "" {
				c := h.gh.Comments()
				if len(c) != 1 || !strings.Contains(c[0].Body, tt.wantComment) {
					t.Errorf("comments = %+v", c)
				}
			}
		})
	}
}

// "Re-run all checks" on perfgate's suite re-measures the PR's head.
func TestCheckSuiteRerequested(t *testing.T) {
	h := newHarness(t)
	h.deliver(t, "check_suite", "check_suite/rerequested.json")
	runs := h.disp.Runs()
	if len(runs) != 1 || runs[0].Tier != TierQuick || runs[0].HeadSHA != headSHA || runs[0].PR != prNumber || !runs[0].Confirm {
		t.Fatalf("runs = %+v, want one confirming quick run of PR #17's head", runs)
	}
	if crs := h.gh.CheckRuns(); len(crs) != 1 || crs[0].Status != "queued" {
		t.Errorf("check runs = %+v, want one queued", crs)
	}
}

func TestGitHub502Retried(t *testing.T) {
	h := newHarness(t)
	h.gh.FailNext("POST", checkPath, 2, http.StatusBadGateway, nil)
	h.deliver(t, "pull_request", "pull_request/opened.json")
	if got := h.gh.RequestsTo("POST", checkPath); len(got) != 3 || got[2].Status != http.StatusCreated {
		t.Fatalf("check-run POSTs = %d, want 2 failures then a 201", len(got))
	}
	if len(h.disp.Runs()) != 1 {
		t.Errorf("run not requested after retries")
	}
}

func TestRequestRunFailureConcludesCheck(t *testing.T) {
	h := newHarness(t)
	h.disp.fail = errors.New("store down")
	h.deliver(t, "pull_request", "pull_request/opened.json")
	runs := h.gh.CheckRuns()
	if len(runs) != 1 || runs[0].Conclusion != "failure" || fmt.Sprint(runs[0].Statuses) != "[queued completed]" {
		t.Errorf("check runs = %+v, want queued then failed", runs)
	}
}

func TestInstallationAndReleaseAccepted(t *testing.T) {
	h := newHarness(t)
	for _, d := range []struct{ event, fixture string }{
		{"installation", "installation/created.json"},
		{"installation_repositories", "installation_repositories/added.json"},
		{"release", "release/published.json"},
	} {
		if rec := h.deliver(t, d.event, d.fixture); rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", d.event, rec.Code)
		}
	}
	if len(h.gh.Requests()) != 0 {
		t.Errorf("logging-only events called GitHub")
	}
}

func TestLogsCarryDelivery(t *testing.T) {
	var buf syncBuffer
	h := newHarness(t, func(c *Config) { c.Logger = zerolog.New(&buf) })
	h.deliverID(t, "pull_request", "pull_request/opened.json", "guid-for-log")
	if !strings.Contains(buf.String(), `"delivery":"guid-for-log"`) {
		t.Errorf("request log lacks the delivery id:\n%s", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
