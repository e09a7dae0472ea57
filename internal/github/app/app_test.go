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

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
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

// fakeDispatcher records what the handlers asked for.
type fakeDispatcher struct {
	mu         sync.Mutex
	runs       []request.Run
	concluded  []request.Conclude
	superseded []string
	closed     []string
	calls      []string
	fail       error
}

func (d *fakeDispatcher) RequestRun(ctx context.Context, req request.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "run:"+req.HeadSHA)
	if d.fail != nil {
		return d.fail
	}
	d.runs = append(d.runs, req)
	return nil
}

func (d *fakeDispatcher) Conclude(ctx context.Context, c request.Conclude) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "conclude:"+string(c.Phase))
	d.concluded = append(d.concluded, c)
	return nil
}

func (d *fakeDispatcher) Supersede(ctx context.Context, repo string, pr int, sha string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "supersede:"+sha)
	d.superseded = append(d.superseded, fmt.Sprintf("%s#%d@%s", repo, pr, sha))
	return nil
}

func (d *fakeDispatcher) Close(ctx context.Context, repo string, pr int, by string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "close")
	d.closed = append(d.closed, fmt.Sprintf("%s#%d by %s", repo, pr, by))
	return nil
}

func (d *fakeDispatcher) Runs() []request.Run {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]request.Run(nil), d.runs...)
}

func (d *fakeDispatcher) Concluded() []request.Conclude {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]request.Conclude(nil), d.concluded...)
}

// fakeOutbox keeps writes by key, as the store's outbox does.
type fakeOutbox struct {
	mu        sync.Mutex
	keys      map[string]bool
	comments  []request.Comment
	reactions []request.Reaction
}

func (o *fakeOutbox) Comment(ctx context.Context, c request.Comment) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.keys[c.Key] {
		o.keys[c.Key] = true
		o.comments = append(o.comments, c)
	}
	return nil
}

func (o *fakeOutbox) React(ctx context.Context, r request.Reaction) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.keys[r.Key] {
		o.keys[r.Key] = true
		o.reactions = append(o.reactions, r)
	}
	return nil
}

func (o *fakeOutbox) Comments() []request.Comment {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]request.Comment(nil), o.comments...)
}

// fakeInbox is the store's inbox in memory: a delivery is a duplicate only
// once it was processed.
type fakeInbox struct {
	mu      sync.Mutex
	pending map[string]delivery
	done    map[string]bool
}

type delivery struct {
	event   string
	payload []byte
}

func (i *fakeInbox) Accept(ctx context.Context, id, event string, payload []byte) (bool, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.done[id] {
		return true, nil
	}
	i.pending[id] = delivery{event, payload}
	return false, nil
}

type fakeAppeals struct {
	mu        sync.Mutex
	opened    []request.Appeal
	decisions []request.Decision
}

func (f *fakeAppeals) Open(ctx context.Context, a request.Appeal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, a)
	return nil
}

func (f *fakeAppeals) Decide(ctx context.Context, d request.Decision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.opened) == 0 {
		return request.ErrNoOpenAppeal
	}
	f.decisions = append(f.decisions, d)
	return nil
}

type harness struct {
	gh      *githubtest.Server
	app     *App
	disp    *fakeDispatcher
	out     *fakeOutbox
	inbox   *fakeInbox
	appeals *fakeAppeals
	n       int
	// errs are the handler errors of the deliveries processed.
	errs []error
}

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	gh := ghtest.New(t)
	cfg := Config{
		GitHub: gh.AppConfig(),
		Retry:  RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxRateLimitWait: time.Minute, Sleep: func(context.Context, time.Duration) error { return nil }},
		Logger: zerolog.Nop(),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h := &harness{gh: gh, disp: &fakeDispatcher{}, appeals: &fakeAppeals{}, out: &fakeOutbox{keys: map[string]bool{}},
		inbox: &fakeInbox{pending: map[string]delivery{}, done: map[string]bool{}}}
	a, err := New(cfg, Deps{Dispatcher: h.disp, Inbox: h.inbox, Outbox: h.out, Appeals: h.appeals})
	if err != nil {
		t.Fatal(err)
	}
	h.app = a
	// The PR as GET /pulls/17 returns it: the fixture's pull_request object.
	var ev struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(ghtest.Fixture(t, "pull_request/opened.json"), &ev); err != nil {
		t.Fatal(err)
	}
	gh.SetPullRequest(repoName, prNumber, ev.PullRequest)
	gh.SetFiles(repoName, prNumber, []githubtest.File{{Filename: "README.md"}, {Filename: "model/attention.py"}})
	gh.SetPermission(repoName, "monalisa", "write", "maintain")
	gh.SetPermission(repoName, "octocat", "read", "read")
	gh.SetContent(repoName, "main", repoconfig.Path, []byte("# defaults\n"))
	return h
}

// deliver sends a signed fixture through App.Handler and processes what
// was stored, as the inbox worker does.
func (h *harness) deliver(t *testing.T, event, fixture string) *httptest.ResponseRecorder {
	t.Helper()
	h.n++
	return h.deliverID(t, event, fixture, fmt.Sprintf("delivery-%s-%d", t.Name(), h.n))
}

func (h *harness) deliverID(t *testing.T, event, fixture, id string) *httptest.ResponseRecorder {
	t.Helper()
	req, err := githubtest.NewDelivery("http://perfgate.test"+hookPath, event, id, ghtest.Fixture(t, fixture), []byte(githubtest.WebhookSecret))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.app.Handler().ServeHTTP(rec, req)
	h.process(t)
	return rec
}

// process runs the handlers of the stored deliveries once; a delivery
// whose handler succeeds is done.
func (h *harness) process(t *testing.T) {
	t.Helper()
	h.inbox.mu.Lock()
	pending := h.inbox.pending
	h.inbox.pending = map[string]delivery{}
	h.inbox.mu.Unlock()
	for id, d := range pending {
		err := h.app.Process(context.Background(), d.event, id, d.payload)
		h.errs = append(h.errs, err)
		if err == nil {
			h.inbox.mu.Lock()
			h.inbox.done[id] = true
			h.inbox.mu.Unlock()
		}
	}
}

// comments are the replies queued for GitHub.
func (h *harness) comments() []request.Comment { return h.out.Comments() }

func TestNewRefusesWeakSecret(t *testing.T) {
	for _, tc := range []struct{ secret, want string }{
		{"", "webhook secret is empty"},
		{" ", "shorter than 16 characters"},
		{"hunter2", "shorter than 16 characters"},
	} {
		gh := ghtest.New(t)
		cfg := Config{GitHub: gh.AppConfig()}
		cfg.GitHub.App.WebhookSecret = tc.secret
		_, err := New(cfg, Deps{Dispatcher: &fakeDispatcher{}, Inbox: &fakeInbox{}, Outbox: &fakeOutbox{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("secret %q: err = %v, want a refusal saying %q", tc.secret, err, tc.want)
		}
	}
}

func TestDeliveryRejected(t *testing.T) {
	body := ghtest.Fixture(t, "pull_request/opened.json")
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
		{"malformed signature", 0, []byte(githubtest.WebhookSecret), func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=zz") }, http.StatusUnauthorized},
		{"body too large", 1024, []byte(githubtest.WebhookSecret), nil, http.StatusRequestEntityTooLarge},
		{"no length", 0, []byte(githubtest.WebhookSecret), func(r *http.Request) { r.ContentLength = -1 }, http.StatusLengthRequired},
		{"no delivery id", 0, []byte(githubtest.WebhookSecret), func(r *http.Request) { r.Header.Del("X-GitHub-Delivery") }, http.StatusBadRequest},
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
			if rec.Code != tt.want {
				t.Errorf("status = %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), tt.want)
			}
			if n := len(h.inbox.pending); n != 0 {
				t.Errorf("rejected delivery was stored")
			}
			if n := len(h.gh.Requests()); n != 0 {
				t.Errorf("rejected delivery reached GitHub with %d calls", n)
			}
		})
	}
}

// A delivery is stored before the 2xx; a redelivery of one that succeeded
// is acknowledged and dropped; of one whose processing failed, processed.
func TestRedelivery(t *testing.T) {
	h := newHarness(t)
	for i, want := range []int{http.StatusAccepted, http.StatusOK} {
		if rec := h.deliverID(t, "pull_request", "pull_request/opened.json", "same-guid"); rec.Code != want {
			t.Fatalf("delivery %d: status %d, want %d", i, rec.Code, want)
		}
	}
	if n := len(h.disp.Runs()); n != 1 {
		t.Errorf("RequestRun called %d times, want 1", n)
	}

	h.gh.FailNext("GET", "/repos/acme/inference/pulls/17/files", 3, http.StatusBadGateway, nil)
	h.deliverID(t, "pull_request", "pull_request/opened.json", "flaky-guid")
	if err := h.errs[len(h.errs)-1]; err == nil {
		t.Fatal("a delivery whose GitHub calls all failed reported success")
	}
	if rec := h.deliverID(t, "pull_request", "pull_request/opened.json", "flaky-guid"); rec.Code != http.StatusAccepted {
		t.Fatalf("redelivery of a failed delivery: %d, want 202", rec.Code)
	}
	if n := len(h.disp.Runs()); n != 2 {
		t.Errorf("RequestRun called %d times, want 2 (the redelivered one processed)", n)
	}
}

// A repository without .github/perfgate.yml gets no check by default, or a
// neutral "not configured" one that links the docs; never a failure.
func TestUnconfiguredRepository(t *testing.T) {
	for _, mode := range []Unconfigured{UnconfiguredQuiet, UnconfiguredNeutral} {
		t.Run(string(mode), func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Unconfigured = mode })
			h.gh.SetContent(repoName, "main", repoconfig.Path, nil)
			h.deliver(t, "pull_request", "pull_request/opened.json")
			if len(h.disp.Runs()) != 0 {
				t.Error("an unconfigured repository was benchmarked")
			}
			c := h.disp.Concluded()
			if mode == UnconfiguredQuiet {
				if len(c) != 0 {
					t.Errorf("quiet mode concluded %+v", c)
				}
				return
			}
			if len(c) != 1 || c[0].Phase != check.NotConfigured || c[0].Phase.Conclusion() != "neutral" || !strings.Contains(c[0].Output.Summary, check.DocsURL) {
				t.Errorf("neutral mode: %+v, want one neutral not-configured check linking %s", c, check.DocsURL)
			}
			// A command there is answered, not run.
			h.deliver(t, "issue_comment", "issue_comment/created.retest.json")
			if cs := h.comments(); len(cs) != 1 || !strings.Contains(cs[0].Body, "has no `.github/perfgate.yml`") {
				t.Errorf("reply to /perf retest: %+v", cs)
			}
		})
	}
}

func TestPullRequestNoMatchingPaths(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFiles(repoName, prNumber, []githubtest.File{{Filename: "docs/index.md"}, {Filename: "models.md"}})
	h.deliver(t, "pull_request", "pull_request/opened.json")
	c := h.disp.Concluded()
	if len(c) != 1 || c[0].Tier != check.TierQuick || c[0].HeadSHA != headSHA || c[0].Phase != check.Skipped || c[0].PR != prNumber {
		t.Fatalf("concluded = %+v, want one skipped quick check", c)
	}
	if c[0].Output.Summary != "no model/** or inference_engine/** changes" {
		t.Errorf("summary = %q", c[0].Output.Summary)
	}
	if n := len(h.disp.Runs()); n != 0 {
		t.Errorf("RequestRun called %d times for an unmatched PR", n)
	}
}

func TestPullRequestMatchingPaths(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		files     []githubtest.File
		wantPages int // file pages listed: listing stops at the first match
	}{
		{"opened, match on page 3", "pull_request/opened.json", append(manyFiles(250), githubtest.File{Filename: "inference_engine/kv/cache.cc"}), 3},
		{"match on page 1 of 40", "pull_request/opened.json", append([]githubtest.File{{Filename: "model/x.py"}}, manyFiles(3999)...), 1},
		{"renamed out of model/", "pull_request/reopened.json", []githubtest.File{{Filename: "legacy/attn.py", PreviousFilename: "model/attn.py", Status: "renamed"}}, 1},
		{"ready for review", "pull_request/ready_for_review.json", []githubtest.File{{Filename: "model/x.py"}}, 1},
		{"over 3000 files: fail safe", "pull_request/opened.json", manyFiles(3100), 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.gh.SetFiles(repoName, prNumber, tt.files)
			h.deliver(t, "pull_request", tt.fixture)
			reqs := h.disp.Runs()
			if len(reqs) != 1 || reqs[0].Tier != check.TierQuick || reqs[0].HeadSHA != headSHA || reqs[0].PR != prNumber || reqs[0].Author != "octocat" {
				t.Fatalf("RequestRun = %+v", reqs)
			}
			// The config the handler decided by travels in the request,
			// read once: the dispatcher plans from it.
			if reqs[0].Config == nil || len(reqs[0].Config.Paths) == 0 {
				t.Errorf("the run request carries no parsed config: %+v", reqs[0].Config)
			}
			if n := len(h.gh.RequestsTo("GET", "/repos/acme/inference/contents/.github/perfgate.yml")); n != 1 {
				t.Errorf("config read %d times, want once", n)
			}
			if n := len(h.gh.RequestsTo("GET", "/repos/acme/inference/pulls/17/files")); n != tt.wantPages {
				t.Errorf("listed %d pages of files, want %d", n, tt.wantPages)
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

// A closed PR stops its work; nothing is read from GitHub for it.
func TestClosedPR(t *testing.T) {
	h := newHarness(t)
	h.deliver(t, "pull_request", "pull_request/closed.json")
	if fmt.Sprint(h.disp.closed) != "[acme/inference#17 by octocat]" || len(h.disp.Runs()) != 0 {
		t.Errorf("closed = %v, runs = %v", h.disp.closed, h.disp.Runs())
	}
}

func TestDraftAndFork(t *testing.T) {
	tests := []struct {
		fixture string
		verdict check.Phase
		summary string
	}{
		{"pull_request/opened.draft.json", check.Skipped, "ready for review"},
		{"pull_request/opened.fork.json", check.Waiting, "/perf approve 9f4c3e1"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			h := newHarness(t)
			h.deliver(t, "pull_request", tt.fixture)
			c := h.disp.Concluded()
			if len(c) != 1 || c[0].Phase != tt.verdict || !strings.Contains(c[0].Output.Summary, tt.summary) {
				t.Fatalf("concluded = %+v", c)
			}
			if len(h.disp.Runs()) != 0 {
				t.Errorf("run requested: %+v", h.disp.Runs())
			}
		})
	}
}

func TestBrokenConfigFailsCheck(t *testing.T) {
	h := newHarness(t)
	h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("paths: [\"model/***\"]\ntriggers:\n  forks: sometimes\n"))
	h.deliver(t, "pull_request", "pull_request/opened.json")
	c := h.disp.Concluded()
	if len(c) != 1 || c[0].Phase.Conclusion() != "failure" {
		t.Fatalf("concluded = %+v, want one failure", c)
	}
	for _, want := range []string{`paths[0]: bad glob "model/***": "**" must be a whole path segment`, `triggers.forks: unknown value "sometimes"`} {
		if !strings.Contains(c[0].Output.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, c[0].Output.Summary)
		}
	}
	// Read from the base ref, never the PR's head.
	got := h.gh.RequestsTo("GET", "/repos/acme/inference/contents/"+repoconfig.Path)
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
		wantTier   check.Tier
		wantDecide int
	}{
		{name: "retest by writer", fixture: "created.retest.json", wantReply: "Re-testing `perfgate / quick`", wantRuns: 1, wantTier: check.TierQuick},
		{name: "retest merge", fixture: "created.retest_merge.json", wantReply: "Re-testing `perfgate / merge`", wantRuns: 1, wantTier: check.TierMerge},
		{name: "retest by read-only user refused", fixture: "created.retest.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "read", "read") },
			wantReply: "needs write access to the repository; you have read access"},
		{name: "retest by non-collaborator refused", fixture: "created.retest.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "", "") },
			wantReply: "you have none access"},
		{name: "unknown command", fixture: "created.unknown.json", wantReply: "Unknown command `/perf benchmark`"},
		{name: "help", fixture: "created.help.json", wantReply: "`/perf appeal accept`"},
		{name: "appeal by read-only author", fixture: "created.appeal.json", wantReply: "Appeal recorded", wantRuns: 1, wantTier: check.TierQuick},
		{name: "accept needs maintain, write refused", fixture: "created.appeal_accept.json",
			setup:     func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "write", "write") },
			wantReply: "needs the maintain or admin role"},
		{name: "accept without an appeal", fixture: "created.appeal_accept.json", wantReply: "no open appeal"},
		{name: "accept by maintainer (legacy permission says write)", fixture: "created.appeal_accept.json",
			setup:     func(h *harness) { h.appeals.opened = []request.Appeal{{PR: 17}} },
			wantReply: "Appeal accepted", wantDecide: 1},
		{name: "reject with reason", fixture: "created.appeal_reject.json",
			setup:     func(h *harness) { h.appeals.opened = []request.Appeal{{PR: 17}} },
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
			comments := h.comments()
			if tt.wantReply == "" {
				if n := len(h.gh.Requests()); n != 0 || len(comments) != 0 || len(h.out.reactions) != 0 {
					t.Errorf("ignored comment caused %d GitHub calls and %d writes", n, len(comments)+len(h.out.reactions))
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
			_ = json.Unmarshal(ghtest.Fixture(t, "issue_comment/"+tt.fixture), &ev)
			if r := h.out.reactions; len(r) != 1 || r[0].CommentID != ev.Comment.ID || r[0].Content != "eyes" {
				t.Errorf("reactions = %+v, want 👀 on the command", r)
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

// A command whose processing failed and is retried answers once.
func TestRetriedCommandAnswersOnce(t *testing.T) {
	h := newHarness(t)
	h.gh.FailNext("GET", "/repos/acme/inference/pulls/17", 3, http.StatusBadGateway, nil)
	h.deliverID(t, "issue_comment", "issue_comment/created.retest.json", "cmd-1")
	if len(h.comments()) != 0 {
		t.Fatalf("a failing attempt answered: %+v", h.comments())
	}
	h.deliverID(t, "issue_comment", "issue_comment/created.retest.json", "cmd-1") // GitHub redelivers
	h.deliverID(t, "issue_comment", "issue_comment/created.retest.json", "cmd-1") // and once more: a duplicate
	if cs := h.comments(); len(cs) != 1 || len(h.disp.Runs()) != 1 {
		t.Errorf("%d replies and %d runs, want one each", len(cs), len(h.disp.Runs()))
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
			h.gh.SetContent(repoName, "main", repoconfig.Path, []byte("triggers:\n  merge_label: perfgate/merge-gate\n"))
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
			if len(runs) != 1 || runs[0].Tier != check.TierMerge || runs[0].HeadSHA != tt.sha {
				t.Fatalf("runs = %+v, want one merge run on %s", runs, tt.sha)
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
	if len(h.disp.Runs()) != 0 || len(h.disp.Concluded()) != 0 {
		t.Errorf("label without configuration ran something")
	}
}

func TestCheckRunActions(t *testing.T) {
	tests := []struct {
		name, fixture string
		setup         func(*harness)
		wantRuns      int
		wantComment   string
	}{
		{"rerequested", "check_run/rerequested.json", nil, 1, ""},
		{"retest button", "check_run/requested_action.retest.json", nil, 1, ""},
		{"retest button by a read-only user is answered", "check_run/requested_action.retest.json",
			func(h *harness) { h.gh.SetPermission(repoName, "monalisa", "read", "read") }, 0, "@monalisa the Retest button on `perfgate / quick` needs write access"},
		{"appeal button", "check_run/requested_action.appeal.json", nil, 0, "/perf appeal <reason>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.setup != nil {
				tt.setup(h)
			}
			h.deliver(t, "check_run", tt.fixture)
			runs := h.disp.Runs()
			if len(runs) != tt.wantRuns {
				t.Fatalf("runs = %+v", runs)
			}
			if tt.wantRuns > 0 && (runs[0].Tier != check.TierQuick || runs[0].HeadSHA != headSHA || runs[0].PR != prNumber) {
				t.Errorf("run = %+v", runs[0])
			}
			c := h.comments()
			if tt.wantComment == "" && len(c) != 0 || tt.wantComment != "" && (len(c) != 1 || !strings.Contains(c[0].Body, tt.wantComment)) {
				t.Errorf("comments = %+v, want %q", c, tt.wantComment)
			}
		})
	}
}

// "Re-run all checks" on perfgate's suite re-measures the PR's head.
func TestCheckSuiteRerequested(t *testing.T) {
	h := newHarness(t)
	h.deliver(t, "check_suite", "check_suite/rerequested.json")
	runs := h.disp.Runs()
	if len(runs) != 1 || runs[0].Tier != check.TierQuick || runs[0].HeadSHA != headSHA || runs[0].PR != prNumber || !runs[0].Confirm {
		t.Fatalf("runs = %+v, want one confirming quick run of PR #17's head", runs)
	}
}

func TestGitHub502Retried(t *testing.T) {
	h := newHarness(t)
	h.gh.FailNext("GET", "/repos/acme/inference/pulls/17/files", 2, http.StatusBadGateway, nil)
	h.deliver(t, "pull_request", "pull_request/opened.json")
	if got := h.gh.RequestsTo("GET", "/repos/acme/inference/pulls/17/files"); len(got) != 3 || got[2].Status != http.StatusOK {
		t.Fatalf("file listings = %d, want 2 failures then a 200", len(got))
	}
	if len(h.disp.Runs()) != 1 {
		t.Errorf("run not requested after retries")
	}
}

// A run that cannot be recorded fails the delivery, which the inbox
// retries; no check was shown, so none is left queued.
func TestRequestRunFailureFailsTheDelivery(t *testing.T) {
	h := newHarness(t)
	h.disp.fail = errors.New("store down")
	h.deliver(t, "pull_request", "pull_request/opened.json")
	if err := h.errs[len(h.errs)-1]; err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("handler error = %v, want the store's", err)
	}
	if n := len(h.gh.RequestsTo("POST", checkPath)); n != 0 {
		t.Errorf("%d check runs created by the handler", n)
	}
}

// A payload that does not parse fails for good (retrying cannot help).
func TestUnparseablePayloadIsPermanent(t *testing.T) {
	h := newHarness(t)
	err := h.app.Process(context.Background(), "pull_request", "d-x", []byte(`{"action": `))
	if err == nil || !backoff.IsPermanent(err) {
		t.Errorf("err = %v, want a permanent parse error", err)
	}
}

func TestInstallationAndReleaseAccepted(t *testing.T) {
	h := newHarness(t)
	for _, d := range []struct{ event, fixture string }{
		{"installation", "installation/created.json"},
		{"installation_repositories", "installation_repositories/added.json"},
		{"release", "release/published.json"},
	} {
		if rec := h.deliver(t, d.event, d.fixture); rec.Code != http.StatusAccepted {
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
