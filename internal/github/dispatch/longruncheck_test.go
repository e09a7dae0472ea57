package dispatch

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// longRunConfig turns both long-run tiers on.
const longRunConfig = `capacity:
  rates: [2, 4, 8, 16, 32]
  slo: {ttft_ms: 250}
  step: 4s
soak:
  duration: 2m
  rate: 20
`

// longRunLifecycle is a lifecycle whose config has the long-run tiers and
// whose judge reads their artifacts.
func longRunLifecycle(t *testing.T) (*lifecycle, *artifact.Dir) {
	t.Helper()
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte(longRunConfig))
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.svc.EnableLongRun(LongRunOptions{Files: files{dir}})
	return l, dir
}

// requestTier asks for tier on sha as the app does for `/perf capacity`.
func (l *lifecycle) requestTier(tier check.Tier, sha string) store.CheckRun {
	l.t.Helper()
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
		HeadSHA: sha, BaseSHA: headSHA, BaseRef: "main", Tier: tier, Trigger: "/perf " + string(tier), Author: "octocat",
		DeliveryID: "d-" + string(tier) + sha[:4]}); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	cr, err := l.st.GetCheckRun(l.ctx, testRepo, sha, string(tier))
	if err != nil {
		l.t.Fatal(err)
	}
	return cr
}

// start claims the queued job and moves its check to in progress.
func (l *lifecycle) start() store.Job {
	l.t.Helper()
	j := l.claim()
	if err := l.svc.SyncStarted(l.ctx); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	return j
}

func putArtifact(t *testing.T, l *lifecycle, dir *artifact.Dir, j store.Job, side, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	sum, n, err := dir.Save(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.PutArtifact(l.ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: side, Name: name, Size: n, SHA256: sum}); err != nil {
		t.Fatal(err)
	}
}

func (l *lifecycle) finish(j store.Job) {
	l.t.Helper()
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		l.t.Fatal(err)
	}
	l.judge()
}

// The capacity tier is a check run of its own: `perfgate / capacity` goes
// queued → in progress → concluded on GitHub. A knee that moved down is a
// regression that warns (neutral, the author told, the clock started) and
// blocks once the clock runs out, like every other regression; a PR whose
// knee stayed put succeeds. The check's text is the latency–throughput
// table, and the row keeps the curve for the web check page.
func TestCapacityCheckRun(t *testing.T) {
	var base, head capacity.Sweep
	readFixture(t, "../../analysis/capacity/testdata/base.json", &base)
	readFixture(t, "../../analysis/capacity/testdata/head.json", &head)
	for _, tc := range []struct {
		name      string
		head      *capacity.Sweep
		want      string
		wantTitle string
		headline  string
	}{
		{"smaller KV cache", &head, "neutral", "Warning: 1 metric regressed", "Regression: sustainable rate 20.70 req/s → 8.72 req/s (−57.9%, threshold −10%): head failed at 9.51 req/s, which base sustained."},
		{"no change", &base, "success", "No regression", "No regression: sustainable rate 20.70 req/s → 20.70 req/s (0.0%, threshold −10%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, dir := longRunLifecycle(t)
			cr := l.requestTier(check.TierCapacity, newSHA)
			j := l.start()
			if j.Kind != agentapi.KindCapacity || j.CheckRunID != cr.ID {
				t.Fatalf("job kind %q check %d, want a capacity job of check %d", j.Kind, j.CheckRunID, cr.ID)
			}
			var plan agentapi.Plan
			if err := json.Unmarshal(j.Config, &plan); err != nil || plan.Capacity == nil || plan.BaseSHA != headSHA || plan.Capacity.SLO.TTFTms != 250 || plan.Capacity.Sweeps != 2 {
				t.Fatalf("job plan %+v (%v): want the config's capacity sweep of base %s", plan.Capacity, err, rev.Short(headSHA))
			}
			for i, side := range plan.CapacitySides() {
				sw := &base
				if side == agentapi.SideHead {
					sw = tc.head
				}
				putArtifact(t, l, dir, j, side, agentapi.CapacityArtifactPrefix+string(rune('1'+i))+".json", agentapi.CapacitySweep{Side: side, Sweep: sw, Knee: sw.Knee()})
			}
			l.finish(j)
			c := l.check(l.rowOf(check.TierCapacity, newSHA).GitHubID)
			if c.Name != "perfgate / capacity" || !slices.Equal(c.Statuses, []string{"queued", "in_progress", "completed"}) || c.Conclusion != tc.want {
				t.Fatalf("check %q statuses %v conclusion %q, want perfgate / capacity queued → in_progress → %s", c.Name, c.Statuses, c.Conclusion, tc.want)
			}
			if !strings.HasPrefix(c.Title, tc.wantTitle) || !strings.Contains(c.Summary, tc.headline) || !strings.Contains(c.Summary, "| offered req/s |") || !strings.Contains(c.Summary, "◆") {
				t.Errorf("check output %q:\n%s\nwant %q, the headline %q and the table with the knees", c.Title, c.Summary, tc.wantTitle, tc.headline)
			}
			if svg := CapacitySVG(l.rowOf(check.TierCapacity, newSHA)); strings.Count(svg, `class="knee"`) != 2 {
				t.Errorf("the row keeps no curve with two knees: %.200s", svg)
			}
			if tc.want == "success" {
				if n := len(l.gh.Comments()); n != 0 {
					t.Errorf("a clean PR got %d comments", n)
				}
				return
			}
			if cm := l.gh.Comments(); len(cm) != 1 || !strings.Contains(cm[0].Body, "`capacity` found a performance regression") || !strings.Contains(cm[0].Body, tc.headline) ||
				!strings.Contains(cm[0].Body, "then fails if the regression is unresolved") || !strings.Contains(cm[0].Body, "`/perf capacity`") {
				t.Fatalf("warning comments %+v, want one naming the capacity check and its deadline", cm)
			}
			l.clock.add(49 * time.Hour)
			if err := l.svc.Escalate(l.ctx); err != nil {
				t.Fatal(err)
			}
			l.flush()
			c = l.check(c.ID)
			if c.Conclusion != "failure" || !strings.HasPrefix(c.Title, "Blocking: 1 metric regressed") || !strings.Contains(c.Summary, "| offered req/s |") {
				t.Errorf("escalated check %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
			}
			if n := len(l.gh.Comments()); n != 2 {
				t.Errorf("%d comments after the escalation, want the warning and the escalation", n)
			}
		})
	}
}

// The soak tier is `perfgate / soak`: a planted leak fails its memory
// trend and warns; a clean engine passes.
func TestSoakCheckRun(t *testing.T) {
	for _, tc := range []struct{ fixture, want, title, headline string }{
		{"leak", "neutral", "Warning: 2 metrics regressed", "Regression: rss +260.9 MB/h (threshold +64 MB/h); TPOT p50 +28.9%/h (threshold +10%/h)."},
		{"clean", "success", "No regression", "No regression: every judged trend (6) is within its limit."},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			l, dir := longRunLifecycle(t)
			l.requestTier(check.TierSoak, newSHA)
			j := l.start()
			var plan agentapi.Plan
			if err := json.Unmarshal(j.Config, &plan); err != nil || plan.Soak == nil || plan.Soak.Duration.D() != 2*time.Minute || plan.Soak.Rate != 20 {
				t.Fatalf("soak plan %+v (%v)", plan.Soak, err)
			}
			var samples []soak.Sample
			readFixture(t, "../../analysis/soak/testdata/"+tc.fixture+".json", &samples)
			putArtifact(t, l, dir, j, agentapi.SideHead, agentapi.SoakArtifact, agentapi.SoakRun{SHA: newSHA, Samples: samples, Report: soak.Judge(samples, soak.DefaultThresholds())})
			l.finish(j)
			c := l.check(l.rowOf(check.TierSoak, newSHA).GitHubID)
			if c.Name != "perfgate / soak" || !slices.Equal(c.Statuses, []string{"queued", "in_progress", "completed"}) || c.Conclusion != tc.want {
				t.Fatalf("check %q statuses %v conclusion %q, want perfgate / soak … %s", c.Name, c.Statuses, c.Conclusion, tc.want)
			}
			if !strings.HasPrefix(c.Title, tc.title) || !strings.Contains(c.Summary, tc.headline) || !strings.Contains(c.Summary, "| rss ") {
				t.Errorf("soak check %q:\n%s\nwant %q, the headline %q and the trends' table", c.Title, c.Summary, tc.title, tc.headline)
			}
		})
	}
}

// A failed capacity job concludes its check with the reason, and a repo
// without a capacity: section cannot queue one.
func TestCapacityCheckBrokenAndUnconfigured(t *testing.T) {
	l, _ := longRunLifecycle(t)
	l.requestTier(check.TierCapacity, newSHA)
	j := l.start()
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Failed, "engine exited 1"); err != nil {
		t.Fatal(err)
	}
	l.judge()
	if c := l.check(l.rowOf(check.TierCapacity, newSHA).GitHubID); c.Conclusion != "failure" || !strings.Contains(c.Summary, "engine exited 1") {
		t.Errorf("failed capacity job: %s %q", c.Conclusion, c.Summary)
	}

	l2 := newLifecycle(t) // the defaults: no capacity section
	err := l2.svc.RequestRun(l2.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
		HeadSHA: newSHA, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierCapacity, Trigger: "/perf capacity"})
	if err == nil || !strings.Contains(err.Error(), "no capacity: section") {
		t.Errorf("capacity on a repo without the section: %v", err)
	}
}

func (l *lifecycle) rowOf(tier check.Tier, sha string) store.CheckRun {
	l.t.Helper()
	cr, err := l.st.GetCheckRun(l.ctx, testRepo, sha, string(tier))
	if err != nil {
		l.t.Fatal(err)
	}
	return cr
}

// The nightly queues the long-run tiers marked nightly: capacity sweeps the
// branch head alone (no base), and a soak not marked stays off.
func TestNightlyQueuesLongRuns(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte(strings.Replace(longRunConfig, "  step: 4s\n", "  step: 4s\n  nightly: true\n", 1)))
	l.gh.SetBranch(testRepo, "main", headSHA, false)
	clients, err := githubapp.NewDefaultCachingClientCreator(l.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Nightly(l.ctx, clients, testRepo); err != nil {
		t.Fatal(err)
	}
	jobs, err := l.st.ListJobs(l.ctx, store.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, j := range jobs {
		kinds[j.Kind]++
		if j.Kind == agentapi.KindCapacity {
			var plan agentapi.Plan
			if err := json.Unmarshal(j.Config, &plan); err != nil || plan.BaseSHA != "" || len(plan.CapacitySides()) != 2 || plan.CapacitySides()[0] != agentapi.SideHead {
				t.Errorf("nightly capacity plan: base %q sides %v (%v), want the head alone, twice", plan.BaseSHA, plan.CapacitySides(), err)
			}
		}
	}
	if kinds[agentapi.KindCapacity] != 1 || kinds[agentapi.KindSoak] != 0 || kinds["nightly"] == 0 {
		t.Fatalf("nightly queued %v, want the nightly's jobs and one capacity sweep, no soak", kinds)
	}
	// The head's sweeps conclude the check with its knee: nothing to
	// compare, so it passes.
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.svc.EnableLongRun(LongRunOptions{Files: files{dir}})
	var head capacity.Sweep
	readFixture(t, "../../analysis/capacity/testdata/head.json", &head)
	for range jobs {
		j := l.claim()
		if j.Kind != agentapi.KindCapacity {
			continue
		}
		for i := range 2 {
			putArtifact(t, l, dir, j, agentapi.SideHead, agentapi.CapacityArtifactPrefix+string(rune('1'+i))+".json", agentapi.CapacitySweep{Side: agentapi.SideHead, Sweep: &head, Knee: head.Knee()})
		}
		l.finish(j)
	}
	c := l.check(l.rowOf(check.TierCapacity, headSHA).GitHubID)
	if c.Conclusion != "success" || c.Title != "No regression" || !strings.Contains(c.Summary, "Recorded: sustainable rate 8.72 req/s; no base was swept") {
		t.Errorf("nightly capacity check %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	// Its knee is the night's point of the capacity series.
	pts, err := l.st.ListTrend(l.ctx, testRepo, "capacity", config.SustainableRate, time.Time{})
	if err != nil || len(pts) != 1 || pts[0].Value != head.Knee().Rate {
		t.Errorf("capacity series %+v (%v), want one point at the knee %g", pts, err, head.Knee().Rate)
	}
}

// An appeal accepted on a capacity regression turns its check green, as on
// any tier.
func TestCapacityRegressionAccepted(t *testing.T) {
	var base, head capacity.Sweep
	readFixture(t, "../../analysis/capacity/testdata/base.json", &base)
	readFixture(t, "../../analysis/capacity/testdata/head.json", &head)
	l, dir := longRunLifecycle(t)
	l.requestTier(check.TierCapacity, newSHA)
	j := l.start()
	putArtifact(t, l, dir, j, agentapi.SideBase, agentapi.CapacityArtifactPrefix+"1.json", agentapi.CapacitySweep{Side: agentapi.SideBase, Sweep: &base, Knee: base.Knee()})
	putArtifact(t, l, dir, j, agentapi.SideHead, agentapi.CapacityArtifactPrefix+"2.json", agentapi.CapacitySweep{Side: agentapi.SideHead, Sweep: &head, Knee: head.Knee()})
	l.finish(j)
	if err := l.svc.Open(l.ctx, request.Appeal{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: newSHA, By: "octocat", Reason: "the bigger model is worth it"}); err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Decide(l.ctx, request.Decision{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: newSHA, Accept: true, By: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if c := l.check(l.rowOf(check.TierCapacity, newSHA).GitHubID); c.Conclusion != "success" || c.Title != "Regression accepted on appeal" {
		t.Errorf("accepted capacity regression: %s %q", c.Conclusion, c.Title)
	}
}
