package bisectjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/bisectjob"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// askFixture is a real git history served by the test GitHub: a config
// commit, then n commits on main, and a side branch off the first.
type askFixture struct {
	ctx    context.Context
	st     store.Store
	gh     *githubtest.Server
	git    *ghtest.GitRepo
	main   []string // main's commits, oldest first
	side   string   // a commit not on main
	asker  *bisectjob.Asker
	outbox *memOutbox
}

type memOutbox struct{ comments []request.Comment }

func (o *memOutbox) Comment(_ context.Context, c request.Comment) error {
	for _, have := range o.comments {
		if have.Key == c.Key {
			return nil
		}
	}
	o.comments = append(o.comments, c)
	return nil
}

func newAskFixture(t *testing.T, n int) *askFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &askFixture{ctx: ctx, st: st, gh: ghtest.New(t), git: ghtest.NewGitRepo(t), outbox: &memOutbox{}}
	f.main = append(f.main, f.git.Commit("perfgate config", map[string]string{config.DefaultPath: "tiers:\n  quick:\n    repeats: 3\n"}))
	f.main = append(f.main, f.git.Commits(n, func(i int) (string, map[string]string) {
		return fmt.Sprintf("change %d (#%d)", i+1, 100+i+1), map[string]string{"engine/knob": fmt.Sprint(i + 1)}
	})...)
	f.git.Git("checkout", "--quiet", "-b", "side", f.main[1])
	f.side = f.git.Commit("side work", map[string]string{"engine/side": "1"})
	f.git.Git("checkout", "--quiet", "main")
	f.git.Git("tag", "v1", f.main[1])
	f.gh.SetGitRepo(repo, f.git.Dir)
	cc, err := githubapp.NewDefaultCachingClientCreator(f.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	configs := repoconfig.Loader{}.Full
	spec := bisectjob.QuickTier{Store: st, Clients: cc, Configs: configs}
	runner := bisectjob.New(st, spec.Spec, bisectjob.OutboxReporter{Outbox: f.outbox, Clients: cc})
	f.asker = &bisectjob.Asker{Runner: runner, Store: st, Clients: cc, Configs: configs}
	return f
}

func (f *askFixture) ask(good, bad, by string) (request.BisectStarted, error) {
	return f.asker.StartBisect(f.ctx, request.Bisect{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "llm",
		Number: 42, Good: good, Bad: bad, By: by})
}

func TestAskStartsOnTheRangeGitHubLists(t *testing.T) {
	f := newAskFixture(t, 12)
	got, err := f.ask("v1", "main", "maintainer")
	if err != nil {
		t.Fatal(err)
	}
	// v1 is main's first change: 11 commits after it, a binary search of
	// ⌈log2 11⌉ = 4 midpoints, the default budget 3·4 + 10.
	if got.Good != f.main[1] || got.Bad != f.main[len(f.main)-1] || got.Commits != 11 || got.Steps != 4 || got.MaxJobs != 22 ||
		got.Metric != bisectjob.DefaultMetric || got.Tier != "quick" {
		t.Fatalf("started %+v, want v1..main resolved (%.7s..%.7s), 11 commits, 4 steps, 22 jobs", got, f.main[1], f.main[len(f.main)-1])
	}
	rec, err := f.st.GetBisect(f.ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bisect.Load(rec.State)
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.ConfigSHA != f.main[len(f.main)-1] {
		t.Errorf("config pinned at %q, want main's head %.7s", s.Config.ConfigSHA, f.main[len(f.main)-1])
	}
	if len(s.Commits) != 12 || s.Commits[5].SHA != f.main[6] || s.Commits[5].PR != 106 || s.Config.Unit != "ms" {
		t.Errorf("bisect commits: %d, [5] = %+v (want %.7s, #106), unit %q", len(s.Commits), s.Commits[5], f.main[6], s.Config.Unit)
	}
	job, err := f.st.GetJob(f.ctx, rec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var plan agentapi.Plan
	if err := json.Unmarshal(job.Config, &plan); err != nil {
		t.Fatal(err)
	}
	// The first job measures the bad end interleaved with the good one
	// (ABBA, the bisect's first pairs) on any card; it belongs to no pull
	// request (a push there must not cancel it).
	if job.Kind != bisectjob.Kind || job.Tier != "quick" || job.PRNumber != 0 || job.GPUUUID != "" ||
		plan.HeadSHA != job.HeadSHA || plan.BaseSHA != job.BaseSHA || plan.Interleave == nil ||
		plan.Interleave.Pairs != bisect.DefaultInitialPairs || plan.Interleave.Order != agentapi.OrderABBA || plan.Repo != repo {
		t.Errorf("first job %+v with plan %+v", job.JobSpec, plan)
	}
	if job.HeadSHA != f.main[len(f.main)-1] || job.BaseSHA != f.main[1] {
		t.Errorf("first job measures %.7s against %.7s, want the bad end against the good", job.HeadSHA, job.BaseSHA)
	}

	// The same request again (a retried delivery) is the same bisect.
	again, err := f.ask("v1", "main", "maintainer")
	if err != nil || again.ID != got.ID {
		t.Errorf("asked again: %+v, %v; want bisect %d", again, err, got.ID)
	}
	// Someone else's is refused, saying where the result goes.
	_, err = f.ask(f.main[1][:10], "main", "other")
	if want := "already running"; !isRefusal(err, want) || !strings.Contains(err.Error(), "#42") {
		t.Errorf("a second bisect of the range: %v, want a refusal saying %q and where", err, want)
	}
}

func TestAskRefusesWithWhy(t *testing.T) {
	f := newAskFixture(t, 6)
	tip := f.main[len(f.main)-1]
	cases := []struct {
		name, good, bad, want string
		limit                 int
	}{
		{"unknown good", "v9", "main", "knows no commit, branch or tag `v9` (the good end)", 0},
		{"unknown bad", "v1", "nope", "`nope` (the bad end)", 0},
		{"same commit", "main", tip, "are the same commit", 0},
		{"swapped", "main", "v1", "the bad commit is older than the good one: swap them", 0},
		{"not an ancestor", f.side, "main", "the good commit is not an ancestor of the bad one", 0},
		{"too long", f.main[0], "main", "there are 6 commits after", 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.asker.MaxCommits = tc.limit
			_, err := f.ask(tc.good, tc.bad, "maintainer")
			if !isRefusal(err, tc.want) || strings.Contains(err.Error(), bisect.ErrRange.Error()) {
				t.Errorf("ask(%s, %s): %v, want a refusal saying %q (and no sentinel)", tc.good, tc.bad, err, tc.want)
			}
		})
	}
	if bs, _ := f.st.ListBisects(f.ctx, store.BisectFilter{}); len(bs) != 0 {
		t.Errorf("refused requests left %d bisects", len(bs))
	}

	// A repository without a perfgate config has nothing to measure with.
	g := ghtest.NewGitRepo(t)
	g.Commit("one", map[string]string{"a": "1"})
	g.Commit("two", map[string]string{"a": "2"})
	f.gh.SetGitRepo(repo, g.Dir)
	f.asker.MaxCommits = 0
	if _, err := f.ask("HEAD~1", "main", "maintainer"); !isRefusal(err, "has no `.github/perfgate.yml` on `main`") {
		t.Errorf("no config: %v", err)
	}
}

func isRefusal(err error, want string) bool {
	var r *request.BisectRefusal
	return errors.As(err, &r) && strings.Contains(r.Reason, want)
}

// TestQuickTierPinsAndStopsAreReported: the job after the first is pinned
// to the card the first ran on; a bisect whose job is cancelled stops and
// says so in a comment where it was asked for.
func TestQuickTierPinsAndStopsAreReported(t *testing.T) {
	f := newAskFixture(t, 8)
	started, err := f.ask("v1", "main", "maintainer")
	if err != nil {
		t.Fatal(err)
	}
	job, err := f.st.Claim(f.ctx, store.ClaimRequest{Lease: 60e9, Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-first-card"}})
	if err != nil {
		t.Fatal(err)
	}
	var plan agentapi.Plan
	if err := json.Unmarshal(job.Config, &plan); err != nil {
		t.Fatal(err)
	}
	for _, sl := range plan.Schedule() {
		i := sl.RunIndex
		data, err := json.Marshal(&result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": 20 * (1 + 0.2*float64(i%2)) * (1 + 0.001*float64(i%3))}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.st.PutResult(f.ctx, store.ResultUpload{JobID: job.ID, LeaseID: job.LeaseID, RunIndex: i, Side: sl.Side, Pair: sl.Pair, GPUUUID: "GPU-first-card",
			IdempotencyKey: fmt.Sprint(i), Kind: jobstate.KindMeasured, Summary: data, Samples: data}); err != nil {
			t.Fatal(err)
		}
	}
	done, err := f.st.Finish(f.ctx, job.ID, job.LeaseID, jobstate.Succeeded, "")
	if err != nil {
		t.Fatal(err)
	}
	// A config pushed meanwhile does not change how the next commit is
	// measured: the bisect plans from the config it started with.
	f.git.Commit("more prompts", map[string]string{config.DefaultPath: "tiers:\n  quick:\n    prompts: 500\n"})
	if _, err := f.asker.Runner.JobDone(f.ctx, done); err != nil {
		t.Fatal(err)
	}
	rec, err := f.st.GetBisect(f.ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	next, err := f.st.GetJob(f.ctx, rec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == job.ID || next.GPUUUID != "GPU-first-card" {
		t.Fatalf("second job %d pinned to %q, want GPU-first-card", next.ID, next.GPUUUID)
	}
	var first, second agentapi.Plan
	if json.Unmarshal(job.Config, &first) != nil || json.Unmarshal(next.Config, &second) != nil ||
		second.Workload.NumPrompts != first.Workload.NumPrompts || second.Workload.NumPrompts == 500 {
		t.Errorf("prompts: first job %d, second %d; want the config the bisect started with", first.Workload.NumPrompts, second.Workload.NumPrompts)
	}
	cancelled, err := f.st.CancelJob(f.ctx, next.ID, "runner drained")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.asker.Runner.JobDone(f.ctx, cancelled); !errors.Is(err, bisectjob.ErrStopped) {
		t.Fatalf("a cancelled job: %v, want ErrStopped", err)
	}
	if len(f.outbox.comments) != 1 {
		t.Fatalf("comments %+v, want one saying the bisect stopped", f.outbox.comments)
	}
	c := f.outbox.comments[0]
	for _, want := range []string{"perfgate bisect stopped", "was cancelled: runner drained", "/perf bisect " + f.main[1][:7]} {
		if !strings.Contains(c.Body, want) || c.Number != 42 {
			t.Errorf("stopped comment on #%d lacks %q:\n%s", c.Number, want, c.Body)
		}
	}
}

// TestStartFromChangePoint: a regression change point on the default
// branch starts one bisect of its range, reported to its issue, on the
// series' median when the change was in a tail the quick tier cannot
// carry; the next night's pass does not start another.
func TestStartFromChangePoint(t *testing.T) {
	f := newAskFixture(t, 6)
	good, bad := f.main[2], f.main[6]
	job, err := f.st.Enqueue(f.ctx, store.JobSpec{Tier: "nightly", Kind: "nightly", Repo: repo, InstallationID: githubtest.InstallationID,
		HeadSHA: bad, Config: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := f.st.PutChangePoint(f.ctx, store.ChangePointRecord{Repo: repo, Key: "nightly/c=1", Metric: "tpot_p99", Day: time.Date(2025, 4, 20, 0, 0, 0, 0, time.UTC),
		GoodSHA: good, BadSHA: bad, BadJobID: job.ID, Change: 0.1, Regression: true, IssueNumber: 12})
	if err != nil {
		t.Fatal(err)
	}
	started, err := f.asker.StartFromChangePoint(f.ctx, cp)
	if err != nil || !started {
		t.Fatalf("started %v, %v", started, err)
	}
	again, err := f.asker.StartFromChangePoint(f.ctx, cp)
	if err != nil || again {
		t.Errorf("the next pass: started %v, %v; want none", again, err)
	}
	bs, err := f.st.ListBisects(f.ctx, store.BisectFilter{Repo: repo})
	if err != nil || len(bs) != 1 {
		t.Fatalf("bisects %+v, %v; want one", bs, err)
	}
	b := bs[0]
	if b.GoodSHA != good || b.BadSHA != bad || b.Number != 12 || b.ChangePointID != cp.ID || b.Metric != "tpot_median" ||
		b.RequestedBy != "changepoint" || b.InstallationID != githubtest.InstallationID {
		t.Errorf("bisect %+v", b)
	}
	// An improvement is not bisected.
	cp.ID, cp.Regression, cp.Metric = 0, false, "ttft_p90"
	if started, err := f.asker.StartFromChangePoint(f.ctx, cp); started || err != nil {
		t.Errorf("an improvement: started %v, %v", started, err)
	}
}

// TestReportNamesTheCulpritsPR: a bisect asked for through the Asker and
// run through the queue posts its result on the issue; a culprit whose
// message names no pull request gets the one GitHub says it belongs to.
func TestReportNamesTheCulpritsPR(t *testing.T) {
	f := newAskFixture(t, 3)
	slow := f.git.Commit("re-tile the decode kernel", map[string]string{"engine/kernel": "tiled"})
	f.git.Commits(4, func(i int) (string, map[string]string) {
		return fmt.Sprintf("later %d (#%d)", i, 200+i), map[string]string{"engine/later": fmt.Sprint(i)}
	})
	pr, err := json.Marshal(map[string]any{"number": 77, "merge_commit_sha": slow, "merged_at": "2025-03-01T12:00:00Z",
		"head": map[string]any{"sha": "0123456789abcdef0123456789abcdef01234567"}})
	if err != nil {
		t.Fatal(err)
	}
	f.gh.SetPullRequest(repo, 77, pr)
	cc, err := githubapp.NewDefaultCachingClientCreator(f.gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	spec := bisectjob.QuickTier{Store: f.st, Clients: cc, Configs: repoconfig.Loader{}.Full}
	f.asker.Runner = bisectjob.New(f.st, spec.Spec, bisectjob.OutboxReporter{Outbox: f.outbox, Clients: cc})
	if _, err := f.ask("v1", "main", "maintainer"); err != nil {
		t.Fatal(err)
	}
	slowFrom := strings.Fields(f.git.Git("rev-list", "--ancestry-path", slow+"^..main"))
	slowSet := map[string]bool{}
	for _, sha := range slowFrom {
		slowSet[sha] = true
	}
	for k := 0; ; k++ {
		job, err := f.st.Claim(f.ctx, store.ClaimRequest{Lease: time.Minute, Labels: []string{"gpu"}, GPUUUIDs: []string{"GPU-card"}})
		if errors.Is(err, store.ErrNoJob) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var plan agentapi.Plan
		if err := json.Unmarshal(job.Config, &plan); err != nil {
			t.Fatal(err)
		}
		for _, sl := range plan.Schedule() {
			i := sl.RunIndex
			v := 20 * (1 + 0.002*float64((k+i)%3))
			if slowSet[plan.Commit(sl.Side)] {
				v *= 1.2
			}
			data, err := json.Marshal(&result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": v}})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.st.PutResult(f.ctx, store.ResultUpload{JobID: job.ID, LeaseID: job.LeaseID, RunIndex: i, Side: sl.Side, Pair: sl.Pair, GPUUUID: "GPU-card",
				IdempotencyKey: fmt.Sprint(i), Kind: jobstate.KindMeasured, Summary: data, Samples: data}); err != nil {
				t.Fatal(err)
			}
		}
		done, err := f.st.Finish(f.ctx, job.ID, job.LeaseID, jobstate.Succeeded, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.asker.Runner.JobDone(f.ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.outbox.comments) != 1 {
		t.Fatalf("comments %+v, want the result", f.outbox.comments)
	}
	c := f.outbox.comments[0]
	if want := "[`" + slow[:7] + "`]"; c.Number != 42 || !strings.Contains(c.Body, "**Culprit: "+want) || !strings.Contains(c.Body, "(re-tile the decode kernel, #77)") {
		t.Errorf("result on #%d does not name %s as the culprit with its PR #77:\n%s", c.Number, slow[:7], c.Body)
	}
}

// TestStoppedAtStartIsARefusal: a bisect whose first job cannot be planned
// (the config broke between the check and the job) is refused with why,
// not retried into one stopped bisect after another.
func TestStoppedAtStartIsARefusal(t *testing.T) {
	f := newAskFixture(t, 4)
	broken := func(context.Context, *github.Client, string, string, string) (*config.Config, error) {
		return nil, &repoconfig.Error{Path: config.DefaultPath, Problems: []string{"tiers.quick.prompts: must be positive"}}
	}
	spec := bisectjob.QuickTier{Store: f.st, Clients: f.asker.Clients, Configs: broken}
	f.asker.Runner = bisectjob.New(f.st, spec.Spec, bisectjob.OutboxReporter{Outbox: f.outbox})
	_, err := f.ask("v1", "main", "maintainer")
	if !isRefusal(err, "stopped before its first job") || !strings.Contains(err.Error(), "must be positive") {
		t.Fatalf("ask: %v, want a refusal naming the config problem", err)
	}
	bs, _ := f.st.ListBisects(f.ctx, store.BisectFilter{Repo: repo})
	if len(bs) != 1 || bs[0].Status != store.BisectFailed {
		t.Errorf("bisects %+v, want one, failed", bs)
	}
}
