package bisectjob_test

import (
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

const repo = "acme/llm"

// agent stands in for a runner: it claims the queued job, uploads one run
// per plan repeat with the commit's TPOT (a planted step and log-normal
// noise), or fails the job for a commit that does not start.
type agent struct {
	t       *testing.T
	st      store.Store
	rng     *rand.Rand
	level   map[string]float64 // SHA → log level
	broken  map[string]bool
	claimed []store.Job
}

// work runs the oldest queued job; false when there is none.
func (a *agent) work(ctx context.Context) (store.Job, bool) {
	a.t.Helper()
	job, err := a.st.Claim(ctx, store.ClaimRequest{Lease: time.Minute, GPUUUIDs: []string{"GPU-bisect-card"}})
	if errors.Is(err, store.ErrNoJob) {
		return store.Job{}, false
	}
	if err != nil {
		a.t.Fatal(err)
	}
	a.claimed = append(a.claimed, job)
	if a.broken[job.HeadSHA] {
		done, err := a.st.Finish(ctx, job.ID, job.LeaseID, jobstate.Failed, "engine exited during start-up (exit status 1)")
		if err != nil {
			a.t.Fatal(err)
		}
		return done, true
	}
	var plan agentapi.Plan
	if err := json.Unmarshal(job.Config, &plan); err != nil {
		a.t.Fatal(err)
	}
	if plan.Interleave == nil || plan.HeadSHA != job.HeadSHA || plan.BaseSHA != job.BaseSHA {
		a.t.Fatalf("job %d's plan does not interleave its head %.7s with its base %.7s: %s", job.ID, job.HeadSHA, job.BaseSHA, job.Config)
	}
	for _, sl := range plan.Schedule() {
		tpot := 20 * math.Exp(a.level[plan.Commit(sl.Side)]+0.02*a.rng.NormFloat64())
		data, err := json.Marshal(&result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": tpot}})
		if err != nil {
			a.t.Fatal(err)
		}
		if _, _, err := a.st.PutResult(ctx, store.ResultUpload{JobID: job.ID, LeaseID: job.LeaseID, RunIndex: sl.RunIndex, Side: sl.Side, Pair: sl.Pair,
			IdempotencyKey: fmt.Sprintf("job-%d-run-%d", job.ID, sl.RunIndex), Kind: jobstate.KindMeasured, Summary: data, Samples: data}); err != nil {
			a.t.Fatal(err)
		}
	}
	done, err := a.st.Finish(ctx, job.ID, job.LeaseID, jobstate.Succeeded, "")
	if err != nil {
		a.t.Fatal(err)
	}
	return done, true
}

type fixture struct {
	ctx     context.Context
	st      store.Store
	gh      *githubtest.Server
	commits []bisect.Commit
	agent   *agent
}

func newFixture(t *testing.T, n, planted int, broken ...int) *fixture {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{ctx: ctx, st: st, gh: ghtest.New(t),
		agent: &agent{t: t, st: st, rng: rand.New(rand.NewPCG(1, 2)), level: map[string]float64{}, broken: map[string]bool{}}}
	for i := 0; i <= n; i++ {
		sha := fmt.Sprintf("%x", sha1.Sum([]byte{byte(i)}))
		f.commits = append(f.commits, bisect.Commit{SHA: sha, Title: fmt.Sprintf("change %d (#%d)", i, 100+i), PR: 100 + i})
		if i >= planted {
			f.agent.level[sha] = math.Log(1.15)
		}
	}
	for _, b := range broken {
		f.agent.broken[f.commits[b].SHA] = true
	}
	return f
}

// spec is the server's part: the quick tier at the commit interleaved with
// its reference, the request's pairs, on one card.
func spec(_ context.Context, rec store.BisectRecord, req bisect.Request) (store.JobSpec, error) {
	plan, err := json.Marshal(agentapi.Plan{Version: agentapi.PlanVersion, Tier: "quick", HeadSHA: req.SHA, BaseSHA: req.RefSHA,
		Interleave: &agentapi.Interleave{Pairs: req.Pairs, Order: agentapi.OrderABBA}})
	if err != nil {
		return store.JobSpec{}, err
	}
	return store.JobSpec{Tier: "quick", PRNumber: rec.Number, Config: plan, GPUUUID: "GPU-bisect-card"}, nil
}

func (f *fixture) runner(t *testing.T, st bisectjob.Store) *bisectjob.Runner {
	cc, err := githubapp.NewDefaultCachingClientCreator(f.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	return bisectjob.New(st, spec, bisectjob.CommentReporter{Clients: cc})
}

func (f *fixture) record() store.BisectRecord {
	return store.BisectRecord{Repo: repo, Metric: "tpot_median", RequestedBy: "maintainer", Number: 7, InstallationID: githubtest.InstallationID}
}

// drain lets the agent run jobs and hands each finished one to the runner
// until the queue is empty.
func (f *fixture) drain(t *testing.T, r *bisectjob.Runner) int {
	jobs := 0
	for {
		job, ok := f.agent.work(f.ctx)
		if !ok {
			return jobs
		}
		jobs++
		handled, err := r.JobDone(f.ctx, job)
		if err != nil || !handled {
			t.Fatalf("JobDone(job %d): handled %v, %v", job.ID, handled, err)
		}
	}
}

func TestBisectThroughTheQueue(t *testing.T) {
	f := newFixture(t, 16, 11, 12)
	r := f.runner(t, f.st)
	rec, err := r.Start(f.ctx, f.record(), f.commits, bisect.Config{Unit: "ms"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.JobID == 0 || rec.Status != store.BisectRunning {
		t.Fatalf("started = %+v", rec)
	}
	if _, err := r.Start(f.ctx, f.record(), f.commits, bisect.Config{}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second bisect of the same range: %v, want ErrConflict", err)
	}
	jobs := f.drain(t, r)

	got, err := f.st.GetBisect(f.ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bisect.Load(got.State)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.BisectDone || s.Result == nil || s.Result.Status != bisect.Found || s.Result.Culprit.SHA != f.commits[11].SHA {
		t.Fatalf("bisect ended %s with %+v, want commit 11 found\n%s", got.Status, s.Result, s.Markdown())
	}
	if s.Result.Jobs != jobs {
		t.Errorf("the result counts %d jobs, the queue ran %d", s.Result.Jobs, jobs)
	}
	for _, j := range f.agent.claimed {
		if j.Kind != bisectjob.Kind || j.Tier != "quick" || j.GPUUUID != "GPU-bisect-card" || j.InstallationID != githubtest.InstallationID {
			t.Errorf("job %d: kind %q tier %q gpu %q installation %d", j.ID, j.Kind, j.Tier, j.GPUUUID, j.InstallationID)
		}
	}
	comments := f.gh.Comments()
	if len(comments) != 1 || comments[0].Number != 7 {
		t.Fatalf("comments = %+v, want one on #7", comments)
	}
	body := comments[0].Body
	for _, want := range []string{"**Culprit: `" + f.commits[11].SHA[:7] + "` (change 11 (#111))**", "@maintainer", "| after job | commit |"} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	t.Logf("16 commits: %d GPU jobs\n%s", jobs, body)

	// A redelivered end of an old job changes nothing.
	if handled, err := r.JobDone(f.ctx, f.agent.claimed[0]); err != nil || !handled {
		t.Errorf("redelivered job: %v, %v", handled, err)
	}
	if again, _ := f.st.GetBisect(f.ctx, rec.ID); again.Version != got.Version {
		t.Errorf("a redelivered job moved the bisect from version %d to %d", got.Version, again.Version)
	}
	if handled, _ := r.JobDone(f.ctx, store.Job{ID: 999, JobSpec: store.JobSpec{Kind: "pull_request"}}); handled {
		t.Error("a job of another kind was taken")
	}
}

// flaky dies at the Nth UpdateBisect: the server is killed between
// queueing a job and recording it, so nothing after (not even cancelling
// that job) happens.
type flaky struct {
	store.Store
	calls, failAt int
}

var errKilled = errors.New("server killed")

func (f *flaky) UpdateBisect(ctx context.Context, id int64, version int, u store.BisectUpdate) (store.BisectRecord, error) {
	f.calls++
	if f.calls >= f.failAt {
		return store.BisectRecord{}, errKilled
	}
	return f.Store.UpdateBisect(ctx, id, version, u)
}

func (f *flaky) CancelJob(ctx context.Context, id int64, reason string) (store.Job, error) {
	if f.calls >= f.failAt {
		return store.Job{}, errKilled
	}
	return f.Store.CancelJob(ctx, id, reason)
}

func TestRestartsResume(t *testing.T) {
	f := newFixture(t, 16, 5)
	// The first server dies recording its third job.
	first := f.runner(t, &flaky{Store: f.st, failAt: 3})
	rec, err := first.Start(f.ctx, f.record(), f.commits, bisect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var dead bool
	for !dead {
		job, ok := f.agent.work(f.ctx)
		if !ok {
			t.Fatal("the queue ran dry before the crash")
		}
		if _, err := first.JobDone(f.ctx, job); err != nil {
			dead = true
		}
	}
	// Just after the crash, Resume leaves the bisect to the path that was
	// moving it (the judge would retry that JobDone): nothing changes.
	second := f.runner(t, f.st)
	before, err := f.st.GetBisect(f.ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Resume(f.ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := f.st.GetBisect(f.ctx, rec.ID); err != nil || after.Version != before.Version || after.JobID != before.JobID {
		t.Fatalf("Resume took a bisect that had just moved: version %d → %d, job %d → %d (%v)", before.Version, after.Version, before.JobID, after.JobID, err)
	}
	// A new server on the same database, a while later, resumes.
	second.Now = func() time.Time { return time.Now().Add(bisectjob.ResumeQuiet) }
	if err := second.Resume(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.drain(t, second)
	if err := second.Resume(f.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := f.st.GetBisect(f.ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bisect.Load(got.State)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.BisectDone || s.Result.Culprit == nil || s.Result.Culprit.SHA != f.commits[5].SHA {
		t.Fatalf("after the restart: %s %+v\n%s", got.Status, s.Result, s.Markdown())
	}
	if n := len(f.gh.Comments()); n != 1 {
		t.Errorf("%d comments, want 1", n)
	}
	// The job queued just before the crash ran as an orphan: its end was
	// ignored, and the bisect counted only its own jobs.
	if ran := len(f.agent.claimed); ran != s.Result.Jobs+1 {
		t.Errorf("the agent ran %d jobs, the bisect counted %d: want one orphan", ran, s.Result.Jobs)
	}
}

func TestJobFailuresSkipAndCancelStops(t *testing.T) {
	// Every commit between the ends fails to start: the bisect narrows to
	// a range and says which commits could not be measured.
	f := newFixture(t, 4, 2, 1, 2, 3)
	r := f.runner(t, f.st)
	rec, err := r.Start(f.ctx, f.record(), f.commits, bisect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f.drain(t, r)
	got, _ := f.st.GetBisect(f.ctx, rec.ID)
	s, err := bisect.Load(got.State)
	if err != nil {
		t.Fatal(err)
	}
	if s.Result == nil || s.Result.Status != bisect.Range || !strings.Contains(f.gh.Comments()[0].Body, "engine exited during start-up") {
		t.Fatalf("result %+v\n%s", s.Result, s.Markdown())
	}

	// A cancelled job stops its bisect as failed.
	g := newFixture(t, 8, 4)
	r = g.runner(t, g.st)
	rec, err = r.Start(g.ctx, g.record(), g.commits, bisect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	job, err := g.st.CancelJob(g.ctx, rec.JobID, "runner drained")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.JobDone(g.ctx, job); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("JobDone of a cancelled job: %v", err)
	}
	if got, _ := g.st.GetBisect(g.ctx, rec.ID); got.Status != store.BisectFailed {
		t.Errorf("status %s, want failed", got.Status)
	}
}
