package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/outbox"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

const newSHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d"

// lifecycle is a Service over a real SQLite store and the fake GitHub, with
// one registered runner and the outbox, for driving check runs through
// their states.
type lifecycle struct {
	t     *testing.T
	ctx   context.Context
	gh    *githubtest.Server
	svc   *Service
	st    store.Store
	ob    *outbox.Sender
	dsn   string
	clock *testClock
	agent store.Agent
	n     int
	// decorate, when set, edits each run runPaired records (what the
	// engine ran with, the requests it ended itself).
	decorate func(slot agentapi.Slot, r *result.Result)
}

func newLifecycle(t *testing.T) *lifecycle {
	t.Helper()
	l := &lifecycle{t: t, ctx: context.Background(), gh: ghtest.New(t), clock: &testClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},
		dsn: filepath.Join(t.TempDir(), "db")}
	l.open()
	ag, err := l.st.RegisterAgent(l.ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	l.agent = ag
	return l
}

func (l *lifecycle) open() {
	l.svc, l.st = newService(l.t, l.gh, l.dsn, l.clock)
	l.ob = sender(l.svc, l.st, l.clock)
	st := l.st
	l.t.Cleanup(func() { st.Close() })
}

// restart closes the store and opens a new service on the same file.
func (l *lifecycle) restart() {
	l.t.Helper()
	if err := l.st.Close(); err != nil {
		l.t.Fatal(err)
	}
	l.open()
}

// flush sends every due GitHub write.
func (l *lifecycle) flush() { l.t.Helper(); flush(l.t, l.ob) }

// judge judges every finished job and sends what that wrote.
func (l *lifecycle) judge() {
	l.t.Helper()
	for {
		n, err := l.svc.JudgePass(l.ctx)
		if err != nil {
			l.t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	l.flush()
}

// quickRuns are verifiedRuns with every metric the default quick tier gates.
func quickRuns(n int) []*result.Result {
	runs := verifiedRuns(n)
	for _, r := range runs {
		r.Metrics["median_itl_ms"] = r.Metrics["p99_itl_ms"] * 0.7
		r.Metrics["p90_tpot_ms"] = r.Metrics["p99_tpot_ms"] * 0.9
		r.Metrics["p90_ttft_ms"] = r.Metrics["p99_ttft_ms"] * 0.9
	}
	return runs
}

// baseline promotes a quick baseline that the candidate runs of
// verifiedRuns match (factor 1) or regress against (factor 1.3: the
// baseline is that much faster).
func (l *lifecycle) baseline(factor float64) {
	l.t.Helper()
	tier, _ := config.Default().Tier("quick")
	base := quickRuns(5)
	for _, r := range base {
		for k := range r.Metrics {
			r.Metrics[k] /= factor
		}
		r.OutputThroughput *= factor
		r.RequestThroughput *= factor
	}
	if _, _, err := baseline.Promote(l.ctx, l.st, base, baseline.Meta{Repo: testRepo, Key: "quick", Version: "v1", Commit: headSHA, By: "t"}, tier); err != nil {
		l.t.Fatal(err)
	}
}

// request does what the app does for a trigger: ask the dispatcher for the
// run; the outbox creates the GitHub check. It returns the check's ID.
func (l *lifecycle) request(sha string, confirm bool) int64 {
	l.t.Helper()
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
		HeadSHA: sha, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierQuick, Trigger: "test", Confirm: confirm, Author: "octocat",
		DeliveryID: fmt.Sprintf("d-%d", l.n)}); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	return l.row(sha).GitHubID
}

// claim takes the oldest queued job.
func (l *lifecycle) claim() store.Job {
	l.t.Helper()
	j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
	if err != nil {
		l.t.Fatal(err)
	}
	return j
}

// succeed uploads runs for a claimed job, finishes it and lets the judge
// and the outbox run.
func (l *lifecycle) succeed(j store.Job, runs []*result.Result) {
	l.t.Helper()
	for i, r := range runs {
		upload(l.t, l.st, j, i, r)
	}
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		l.t.Fatal(err)
	}
	l.judge()
}

// failJob finishes a claimed job as failed with reason.
func (l *lifecycle) failJob(j store.Job, reason string) {
	l.t.Helper()
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Failed, reason); err != nil {
		l.t.Fatal(err)
	}
	l.judge()
}

// runAll claims and succeeds every queued job.
func (l *lifecycle) runAll() {
	l.t.Helper()
	for {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			return
		}
		if err != nil {
			l.t.Fatal(err)
		}
		l.succeed(j, quickRuns(3))
	}
}

func (l *lifecycle) check(id int64) githubtest.CheckRun {
	l.t.Helper()
	for _, c := range l.gh.CheckRuns() {
		if c.ID == id {
			return c
		}
	}
	l.t.Fatalf("no check run %d on the fake GitHub", id)
	return githubtest.CheckRun{}
}

func (l *lifecycle) row(sha string) store.CheckRun {
	l.t.Helper()
	cr, err := l.st.GetCheckRun(l.ctx, testRepo, sha, "quick")
	if err != nil {
		l.t.Fatal(err)
	}
	return cr
}

// A new push concludes the older commit's open check runs on GitHub
// (cancelled, saying why) instead of leaving them queued forever, and a
// signalled job that still finishes afterwards does not revive them.
func TestSupersedeConcludesOpenChecks(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	old := l.request(headSHA, false)
	running := l.claim() // the agent is measuring the old head when the push lands
	if err := l.svc.Supersede(l.ctx, testRepo, 17, newSHA); err != nil {
		t.Fatal(err)
	}
	l.flush()
	c := l.check(old)
	if c.Status != "completed" || c.Conclusion != "cancelled" || !strings.Contains(c.Summary, rev.Short(newSHA)) {
		t.Errorf("old head's check after a push: %s/%s %q, want completed/cancelled naming %s", c.Status, c.Conclusion, c.Summary, rev.Short(newSHA))
	}
	// The agent finishes before it hears of the cancel: its regression
	// must not be published on the dead check or start a clock.
	l.succeed(running, quickRuns(3))
	if c := l.check(old); c.Conclusion != "cancelled" {
		t.Errorf("a late job result reopened the superseded check: %s", c.Conclusion)
	}
	if cr := l.row(headSHA); !cr.Deadline.IsZero() {
		t.Errorf("superseded check got an escalation deadline %v", cr.Deadline)
	}
	if n := len(l.gh.Comments()); n != 0 {
		t.Errorf("superseded commit got %d comment(s)", n)
	}
}

// A retest while the first run is still queued replaces the check run: the
// replaced one is concluded on GitHub, not left queued.
func TestRetestConcludesReplacedCheck(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1)
	first := l.request(headSHA, false)
	second := l.request(headSHA, true)
	if c := l.check(first); c.Status != "completed" || c.Conclusion != "cancelled" {
		t.Errorf("replaced check: %s/%s, want completed/cancelled", c.Status, c.Conclusion)
	}
	l.runAll()
	if c := l.check(second); c.Conclusion != "success" {
		t.Errorf("retest check: %s/%s, want success\n%s", c.Status, c.Conclusion, c.Summary)
	}
}

// The escalation clock belongs to the commit: a retest (or any re-run of
// the same SHA) keeps it, a retest in flight at the deadline does not reset
// it, and an escalated regression that a retest confirms stays blocking.
func TestRetestKeepsTheClock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		escalate bool // let the first warning escalate before the retest
	}{
		{"warned, retest in flight at the deadline", false},
		{"escalated, retest confirms", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			l.baseline(1.3)
			first := l.request(headSHA, false)
			l.runAll()
			if c := l.check(first); c.Conclusion != "neutral" {
				t.Fatalf("first verdict %s, want neutral warning\n%s", c.Conclusion, c.Summary)
			}
			deadline := l.row(headSHA).Deadline
			if tc.escalate {
				l.clock.add(49 * time.Hour)
				if err := l.svc.Escalate(l.ctx); err != nil {
					t.Fatal(err)
				}
				l.flush()
				if c := l.check(first); c.Conclusion != "failure" {
					t.Fatalf("not escalated: %s", c.Conclusion)
				}
			}
			comments := len(l.gh.Comments())
			retest := l.request(headSHA, true)
			if !tc.escalate {
				if got := l.row(headSHA).Deadline; !got.Equal(deadline) {
					t.Errorf("retest moved the deadline from %v to %v", deadline, got)
				}
				l.clock.add(49 * time.Hour) // the deadline passes while the retest is queued
				if err := l.svc.Escalate(l.ctx); err != nil {
					t.Fatal(err)
				}
			}
			l.runAll()
			if err := l.svc.Escalate(l.ctx); err != nil {
				t.Fatal(err)
			}
			l.flush()
			if c := l.check(retest); c.Conclusion != "failure" {
				t.Errorf("retest check %s, want failure (escalated)\n%s", c.Conclusion, c.Summary)
			}
			var blocking int
			for _, c := range l.gh.Comments()[comments:] {
				if !strings.Contains(c.Body, "now blocking") {
					t.Errorf("the retest posted another warning comment:\n%s", c.Body)
					continue
				}
				blocking++
			}
			if want := map[bool]int{false: 1, true: 0}[tc.escalate]; blocking != want {
				t.Errorf("%d escalation comments after the retest, want %d", blocking, want)
			}
			if cr := l.row(headSHA); cr.State != store.CheckEscalated || !cr.Deadline.IsZero() {
				t.Errorf("row after a confirmed regression: state %s deadline %v, want escalated with no clock", cr.State, cr.Deadline)
			}
		})
	}
}

// Escalation is a store step; a check whose GitHub write fails (its
// installation is gone) neither stops the others nor loses its own
// escalation: the row is escalated and the refused write is kept in the
// outbox with GitHub's answer.
func TestEscalateContinuesPastAFailure(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	good := l.request(newSHA, false)
	l.runAll()
	// The other commit's check belongs to an installation GitHub no longer
	// knows.
	if _, err := l.st.PutCheckRun(l.ctx, store.CheckRun{Repo: testRepo, HeadSHA: headSHA, Tier: "quick", PRNumber: 17, InstallationID: 999,
		GitHubID: 12345, State: store.CheckWarned, Deadline: l.clock.now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l.clock.add(49 * time.Hour)
	if err := l.svc.Escalate(l.ctx); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if c := l.check(good); c.Conclusion != "failure" {
		t.Errorf("the healthy check was not escalated beside the broken one: %q", c.Conclusion)
	}
	broken := l.row(headSHA)
	if broken.State != store.CheckEscalated || broken.SyncedVersion >= broken.DesiredVersion {
		t.Errorf("the check whose GitHub write fails: state %s synced %d of %d; want escalated, not yet synced", broken.State, broken.SyncedVersion, broken.DesiredVersion)
	}
	sync, err := l.st.GetEffect(l.ctx, store.CheckSyncKey(broken.ID))
	if err != nil || sync.Status != store.EffectFailed || !strings.Contains(sync.LastError, "404") {
		t.Errorf("its sync: %+v %v, want failed with GitHub's 404 recorded (the installation is gone)", sync, err)
	}
}

// A run that could not be measured: the runner's fault (an agent lost) is
// neutral; the commit's (its engine failed) is a failure quoting the
// reason, even when another job of the check was only lost; a base commit
// that cannot be measured is not the PR's fault.
func TestFailedRunVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reasons []string // one job each
		want    string
	}{
		{"agent lost", []string{"agent lost: lease expired 3 times"}, "neutral"},
		{"engine failed", []string{"engine never became ready: /health timed out"}, "failure"},
		{"engine failed, retest lost", []string{"engine never became ready: /health timed out", "agent lost: lease expired 3 times"}, "failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			l.baseline(1)
			var id int64
			for i, reason := range tc.reasons {
				// Each after the one before ended: a retest keeps the
				// ended jobs as evidence (one still queued is cancelled).
				id = l.request(headSHA, i > 0)
				l.failJob(l.claim(), reason)
			}
			c := l.check(id)
			if c.Conclusion != tc.want {
				t.Errorf("conclusion %s, want %s\n%s", c.Conclusion, tc.want, c.Summary)
			}
			if !strings.Contains(c.Summary+c.Text, "engine never became ready") && tc.want == "failure" {
				t.Errorf("the failure does not quote the engine's reason:\n%s", c.Summary)
			}
		})
	}
	t.Run("base commit failed", func(t *testing.T) {
		l := newLifecycle(t) // no baseline: the base commit is measured
		id := l.request(newSHA, false)
		l.succeed(l.claim(), quickRuns(3))
		l.failJob(l.claim(), "engine never became ready: /health timed out")
		if c := l.check(id); c.Conclusion != "neutral" {
			t.Errorf("a base commit that cannot be measured concluded the PR's check %s, want neutral\n%s", c.Conclusion, c.Summary)
		}
	})
}

// A release promotes the nightly matrix cell by cell, under the keys the
// nightly judges by, never the cells' runs pooled under one key.
func TestReleasePromotesEachMatrixCell(t *testing.T) {
	l := newLifecycle(t)
	cfg := config.Default()
	for _, cell := range []string{"c=1", "c=16"} {
		plan, _ := agentapi.PlanFromConfig(cfg, "nightly")
		plan.Repo, plan.HeadSHA = testRepo, headSHA
		snap, _ := newSnapshot(cfg, plan)
		snap.Cell = cell
		raw, _ := snap.encode()
		if _, err := l.st.Enqueue(l.ctx, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: testRepo, InstallationID: githubtest.InstallationID,
			HeadSHA: headSHA, BaseSHA: headSHA, Config: raw, Labels: []string{"gpu"}}); err != nil {
			t.Fatal(err)
		}
		j := l.claim()
		for i, r := range verifiedRuns(5) {
			upload(t, l.st, j, i, r)
		}
		if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.svc.ReleasePublished(l.ctx, request.Release{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", Tag: "v2.0.0", TargetCommit: headSHA, By: "octocat"}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"nightly/c=1", "nightly/c=16"} {
		if b, err := l.st.LatestBaseline(l.ctx, testRepo, key); err != nil || b.Reason != "release v2.0.0" {
			t.Errorf("baseline %s after the release: %+v %v", key, b, err)
		}
	}
	if b, err := l.st.LatestBaseline(l.ctx, testRepo, "nightly"); err == nil {
		t.Errorf("the cells' runs were pooled into one nightly baseline (v%d, %s)", b.Version, b.Reason)
	}
}

// A nightly whose run cannot be recorded (the default branch's config is
// broken) concludes the check it queued instead of leaving it queued.
func TestNightlyConcludesCheckItCouldNotQueue(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("tiers: [not a map\n"))
	// The fake lacks the repository lookups a nightly makes first; answer
	// those here and pass the rest through.
	target, _ := url.Parse(l.gh.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/repos/acme/inference/installation":
			fmt.Fprintf(w, `{"id": %d}`, githubtest.InstallationID)
		case "/repos/acme/inference":
			fmt.Fprint(w, `{"id": 1, "name": "inference", "full_name": "acme/inference", "default_branch": "main"}`)
		case "/repos/acme/inference/branches/main":
			fmt.Fprintf(w, `{"name": "main", "commit": {"sha": %q}}`, headSHA)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer front.Close()
	cfg := l.gh.AppConfig()
	cfg.V3APIURL = front.URL + "/"
	clients, err := githubapp.NewDefaultCachingClientCreator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Nightly(l.ctx, clients, testRepo); err == nil {
		t.Error("Nightly hid the failure")
	}
	l.flush()
	runs := l.gh.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("%d check runs, want the one nightly", len(runs))
	}
	if c := runs[0]; c.Status != "completed" || c.Conclusion != "failure" {
		t.Errorf("nightly check that could not be queued: %s/%s, want completed/failure", c.Status, c.Conclusion)
	}
}

// An accepted regression that a later retest confirms stays accepted and
// still says who accepted it; it does not start a fresh warning.
func TestRetestKeepsAnAcceptedAppeal(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	l.request(headSHA, false)
	l.runAll()
	if err := l.svc.Open(l.ctx, request.Appeal{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, By: "octocat", Reason: "the new scheduler trades latency for memory"}); err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Decide(l.ctx, request.Decision{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, Accept: true, By: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	l.flush()
	comments := len(l.gh.Comments())
	retest := l.request(headSHA, true)
	l.runAll()
	c := l.check(retest)
	if c.Conclusion != "success" || !strings.Contains(c.Summary+c.Text, "@maintainer") {
		t.Errorf("retest of an accepted regression: %s, want success naming the maintainer\n%s", c.Conclusion, c.Summary)
	}
	if n := len(l.gh.Comments()) - comments; n != 0 {
		t.Errorf("the retest posted %d warning comment(s) on an accepted regression", n)
	}
	if cr := l.row(headSHA); cr.State != store.CheckAccepted || !cr.Deadline.IsZero() {
		t.Errorf("row: state %s deadline %v, want accepted with no clock", cr.State, cr.Deadline)
	}
}

// The usual appeal order: the author appeals (which queues a retest) and a
// maintainer accepts while that retest still runs. The retest's result
// must not bring the warning back.
func TestAcceptWhileAppealRetestRuns(t *testing.T) {
	l := newLifecycle(t)
	l.baseline(1.3)
	l.request(headSHA, false)
	l.runAll()
	if err := l.svc.Open(l.ctx, request.Appeal{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, By: "octocat", Reason: "memory for latency"}); err != nil {
		t.Fatal(err)
	}
	retest := l.request(headSHA, true) // queued: the row is no longer "warned"
	if err := l.svc.Decide(l.ctx, request.Decision{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: headSHA, Accept: true, By: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	l.flush()
	comments := len(l.gh.Comments())
	l.runAll()
	c := l.check(retest)
	if c.Conclusion != "success" || !strings.Contains(c.Summary+c.Text, "@maintainer") {
		t.Errorf("retest finishing after an accepted appeal: %s, want success naming the maintainer\n%s", c.Conclusion, c.Summary)
	}
	if n := len(l.gh.Comments()) - comments; n != 0 {
		t.Errorf("%d warning comment(s) after the appeal was accepted", n)
	}
	if cr := l.row(headSHA); cr.State != store.CheckAccepted || !cr.Deadline.IsZero() {
		t.Errorf("row: state %s deadline %v, want accepted with no clock", cr.State, cr.Deadline)
	}
}

// A nightly that cannot be queued at cron time (GitHub answers 502) is
// queued at the next retry tick; a broken config is not retried.
func TestNightlyRetriedAtTheNextTick(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetBranch(testRepo, "main", headSHA, false)
	clients, err := githubapp.NewDefaultCachingClientCreator(l.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	l.gh.FailNext("GET", "/repos/acme/inference/installation", 1, http.StatusBadGateway, nil)
	n := &nightlyRuns{s: l.svc, clients: clients}
	n.run(l.ctx, []string{testRepo})
	if jobs, _ := l.st.ListJobs(l.ctx, store.JobFilter{}); len(jobs) != 0 {
		t.Fatalf("%d jobs while GitHub was down", len(jobs))
	}
	n.retry(l.ctx)
	jobs, err := l.st.ListJobs(l.ctx, store.JobFilter{})
	if err != nil || len(jobs) == 0 || jobs[0].Tier != "nightly" {
		t.Fatalf("after the retry tick: %+v %v, want the nightly queued", jobs, err)
	}
	n.retry(l.ctx) // nothing left to retry: no second nightly
	if again, _ := l.st.ListJobs(l.ctx, store.JobFilter{}); len(again) != len(jobs) {
		t.Errorf("the retry tick queued the nightly again: %d jobs, then %d", len(jobs), len(again))
	}

	// A broken config is the repository's to fix: its check says so and
	// the retry tick leaves it alone.
	b := newLifecycle(t)
	b.gh.SetBranch(testRepo, "main", headSHA, false)
	b.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("tiers: [not a map\n"))
	bc, _ := githubapp.NewDefaultCachingClientCreator(b.gh.AppConfig())
	bn := &nightlyRuns{s: b.svc, clients: bc}
	bn.run(b.ctx, []string{testRepo})
	if len(bn.failed) != 0 {
		t.Errorf("a broken config is retried: %v", bn.failed)
	}
}
