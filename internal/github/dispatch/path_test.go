package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// callLog is a store that records the judge path's calls to it, marking
// where the pure judgement ran; a call while the judgement runs fails the
// test (nothing reaches the store from inside judge.Judge).
type callLog struct {
	Store
	t       *testing.T
	mu      sync.Mutex
	calls   []string
	judging bool
	steps   []store.CheckChange // what each ApplyCheck carried
}

// judged is the mark the wrapped judgement leaves in the log.
const judged = "<judge>"

// writes are the store's methods the judge path may write with.
var writes = []string{"PutBaseline", "AppendAudit", "Enqueue", "ApplyCheck", "PutEffect", "PutTrend"}

func (c *callLog) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.judging {
		c.t.Errorf("%s reached the store while the judgement ran", name)
	}
	c.calls = append(c.calls, name)
}

// around wraps the Service's judgement so the log shows where it ran.
func (c *callLog) around(j func(judge.Input) judge.Decision) func(judge.Input) judge.Decision {
	return func(in judge.Input) judge.Decision {
		c.add(judged)
		c.mu.Lock()
		c.judging = true
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.judging = false; c.mu.Unlock() }()
		return j(in)
	}
}

func (c *callLog) GetJob(ctx context.Context, id int64) (store.Job, error) {
	c.add("GetJob")
	return c.Store.GetJob(ctx, id)
}

func (c *callLog) ListResults(ctx context.Context, id int64) ([]store.Result, error) {
	c.add("ListResults")
	return c.Store.ListResults(ctx, id)
}

func (c *callLog) ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error) {
	c.add("ListJobs")
	return c.Store.ListJobs(ctx, f)
}

func (c *callLog) GetCheckRun(ctx context.Context, repo, sha, tier string) (store.CheckRun, error) {
	c.add("GetCheckRun")
	return c.Store.GetCheckRun(ctx, repo, sha, tier)
}

func (c *callLog) GetCheckRunByID(ctx context.Context, id int64) (store.CheckRun, error) {
	c.add("GetCheckRunByID")
	return c.Store.GetCheckRunByID(ctx, id)
}

func (c *callLog) ListCheckRuns(ctx context.Context, repo string, pr int) ([]store.CheckRun, error) {
	c.add("ListCheckRuns")
	return c.Store.ListCheckRuns(ctx, repo, pr)
}

func (c *callLog) LatestBaseline(ctx context.Context, repo, key string) (store.Baseline, error) {
	c.add("LatestBaseline")
	return c.Store.LatestBaseline(ctx, repo, key)
}

func (c *callLog) BaselineHistory(ctx context.Context, repo, key string) ([]store.Baseline, error) {
	c.add("BaselineHistory")
	return c.Store.BaselineHistory(ctx, repo, key)
}

func (c *callLog) ListAppeals(ctx context.Context, repo string, pr int) ([]store.Appeal, error) {
	c.add("ListAppeals")
	return c.Store.ListAppeals(ctx, repo, pr)
}

func (c *callLog) PutBaseline(ctx context.Context, b store.Baseline) (store.Baseline, error) {
	c.add("PutBaseline")
	return c.Store.PutBaseline(ctx, b)
}

func (c *callLog) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	c.add("AppendAudit")
	return c.Store.AppendAudit(ctx, e)
}

func (c *callLog) Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error) {
	c.add("Enqueue")
	return c.Store.Enqueue(ctx, spec)
}

func (c *callLog) ApplyCheck(ctx context.Context, ch store.CheckChange) (store.CheckRun, bool, error) {
	c.add("ApplyCheck")
	c.mu.Lock()
	c.steps = append(c.steps, ch)
	c.mu.Unlock()
	return c.Store.ApplyCheck(ctx, ch)
}

func (c *callLog) PutEffect(ctx context.Context, e store.Effect) (bool, error) {
	c.add("PutEffect")
	return c.Store.PutEffect(ctx, e)
}

func (c *callLog) ListRootCauses(ctx context.Context, repo string) ([]store.RootCause, error) {
	c.add("ListRootCauses")
	return c.Store.ListRootCauses(ctx, repo)
}

func (c *callLog) ListArtifacts(ctx context.Context, jobID int64) ([]store.Artifact, error) {
	c.add("ListArtifacts")
	return c.Store.ListArtifacts(ctx, jobID)
}

func (c *callLog) PutTrend(ctx context.Context, p store.TrendPoint) error {
	c.add("PutTrend")
	return c.Store.PutTrend(ctx, p)
}

// A finished job's path through the judge is one load (reads only), one
// pure judgement (no store call while it runs), and one store step: the
// one ApplyCheck that changes the check with everything the decision
// writes in one transaction — its effects, the jobs it adds (runs added,
// the base commit measured, a regression's profiling pass), a nightly's
// trend points and the first baselines it promotes. The log would show a
// write moved into the load, a second judgement, a read after the
// judgement that fed it (the knowledge base and profiling pass a
// regression's notes go on included), or a write of its own beside the
// step; carries checks the step holds what the outcome writes.
func TestFinishedJobPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(l *lifecycle) store.Job // finishes a job, unjudged
		// carries says what the step lacks ("" when it holds what the
		// outcome writes).
		carries func(ch store.CheckChange) string
	}{
		{"verdict", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(5))
		}, func(ch store.CheckChange) string {
			return none(ch.State == store.CheckPassed && len(ch.AddJobs) == 0 && ch.BaseJob == nil, "a passed check and nothing else")
		}},
		// A regression holds on the accepted appeals the load read.
		{"regression", func(l *lifecycle) store.Job {
			l.baseline(1.3)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(5))
		}, func(ch store.CheckChange) string {
			return none(ch.State == store.CheckWarned && len(ch.Effects) == 1, "a warned check and its warning comment")
		}},
		// With findings on, the load reads the knowledge base and any
		// profiling pass of the commits; the step queues the pass
		// profile.on_regression asks for.
		{"regression, findings on", func(l *lifecycle) store.Job {
			l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("profile:\n  on_regression: [quick]\n  requests: 32\n"))
			l.svc.EnableFindings(FindingsOptions{})
			l.baseline(1.3)
			l.request(newSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(5))
		}, func(ch store.CheckChange) string {
			return none(ch.State == store.CheckWarned && len(ch.AddJobs) == 0 && ch.ProfileJob != nil && ch.ProfileJob.Kind == agentapi.KindProfile &&
				ch.ProfileJob.HeadSHA == newSHA && ch.ProfileJob.BaseSHA == headSHA && ch.ProfileJob.PRNumber == 17 &&
				strings.Contains(string(ch.Verdict), "a pass queued with this verdict"),
				"a warned check, the profiling pass of base and head beside its jobs, and the note that says so")
		}},
		{"runs added", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", scaled(1, 1.2, 0.8))
		}, func(ch store.CheckChange) string {
			return none(len(ch.AddJobs) == 1 && ch.AddJobs[0].Kind == kindExtend && ch.AddJobs[0].GPUUUID == testCard,
				"one extension job pinned to the card the runs ran on")
		}},
		{"engine failed", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Failed, "engine never became ready: /health timed out", nil)
		}, func(ch store.CheckChange) string {
			return none(ch.State == store.CheckErrored && len(ch.AddJobs) == 0, "an errored check and no job")
		}},
		{"no baseline", func(l *lifecycle) store.Job {
			l.request(newSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(3))
		}, func(ch store.CheckChange) string {
			return none(ch.BaseJob != nil && ch.BaseJob.Kind == kindBaseline && ch.BaseJob.HeadSHA == headSHA && ch.BaseJob.GPUUUID == testCard && len(ch.AddJobs) == 0,
				"the base commit's job, pinned to the card, beside the check's jobs")
		}},
		{"base measured", func(l *lifecycle) store.Job {
			l.request(newSHA, false)
			l.end(l.claim(), jobstate.Succeeded, "", quickRuns(3))
			l.judge()
			base, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, GPUUUIDs: []string{testCard}, Lease: time.Minute})
			if err != nil || base.Kind != kindBaseline {
				l.t.Fatalf("claim the base commit's job: %+v, %v", base, err)
			}
			return l.end(base, jobstate.Succeeded, "", quickRuns(5))
		}, func(ch store.CheckChange) string {
			return none(len(ch.Baselines) == 1 && ch.Baselines[0].Baseline.Key == "quick" && ch.Baselines[0].Baseline.Version == 1 && ch.Baselines[0].Audit != nil &&
				strings.Contains(string(ch.Verdict), "promoted as the first `quick` baseline"),
				"the base commit's runs promoted as the first baseline, with its audit and the verdict's note")
		}},
		{"nightly matrix", func(l *lifecycle) store.Job {
			if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference",
				HeadSHA: headSHA, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierNightly, Trigger: "nightly", DeliveryID: "nightly-1"}); err != nil {
				l.t.Fatal(err)
			}
			var last store.Job
			for range len(l.rowOf(check.TierNightly, headSHA).JobIDs) {
				last = l.end(l.claim(), jobstate.Succeeded, "", verifiedRuns(5))
			}
			return last
		}, func(ch store.CheckChange) string {
			cells := len(ch.Baselines)
			return none(cells > 1 && len(ch.Trends) >= cells && strings.Count(string(ch.Verdict), "first nightly, promoted as the cell's baseline") == cells,
				"every new cell's trend points and first baseline, and a note for each")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			job := tc.run(l)
			log := &callLog{Store: l.st, t: t}
			l.svc.st, l.svc.decide = log, log.around(judge.Judge)
			if err := l.svc.jobDone(l.ctx, job); err != nil {
				t.Fatal(err)
			}
			at := slices.Index(log.calls, judged)
			if at < 0 || slices.Index(log.calls[at+1:], judged) >= 0 {
				t.Fatalf("the judgement ran %d times, want once: %v", count(log.calls, judged), log.calls)
			}
			for _, c := range log.calls[:at] {
				if slices.Contains(writes, c) {
					t.Errorf("the load wrote (%s) before the judgement: %v", c, log.calls)
				}
			}
			if got := log.calls[at+1:]; !slices.Equal(got, []string{"ApplyCheck"}) {
				t.Fatalf("after the judgement the store saw %v, want only the one step [ApplyCheck] (all: %v)", got, log.calls)
			}
			if lacks := tc.carries(log.steps[0]); lacks != "" {
				t.Errorf("the step does not carry %s: %+v", lacks, log.steps[0])
			}
			if lost := l.lost(log.steps[0]); lost != "" {
				t.Error(lost)
			}
		})
	}
}

// lost says what of the step ch the store does not hold: its row's state,
// the base commit's job recorded on the row (not among its jobs), each
// baseline with its audit entry, each trend point.
func (l *lifecycle) lost(ch store.CheckChange) string {
	l.t.Helper()
	row, err := l.st.GetCheckRunByID(l.ctx, ch.ID)
	if err != nil || row.State != ch.State {
		return fmt.Sprintf("the row is %+v (%v), want state %s", row, err, ch.State)
	}
	if ch.BaseJob != nil {
		id := l.svc.docOf(row).BaselineJob
		j, err := l.st.GetJob(l.ctx, id)
		if err != nil || j.Kind != kindBaseline || j.CheckRunID != row.ID || j.Status != jobstate.Queued || slices.Contains(row.JobIDs, id) {
			return fmt.Sprintf("the base commit's job recorded on the row is %d: %+v (%v)", id, j, err)
		}
	}
	if ch.ProfileJob != nil {
		jobs, err := l.st.ListJobs(l.ctx, store.JobFilter{Repo: testRepo, Tier: agentapi.KindProfile})
		if err != nil || len(jobs) != 1 || jobs[0].Kind != agentapi.KindProfile || jobs[0].HeadSHA != ch.ProfileJob.HeadSHA ||
			jobs[0].BaseSHA != ch.ProfileJob.BaseSHA || jobs[0].Status != jobstate.Queued || slices.Contains(row.JobIDs, jobs[0].ID) {
			return fmt.Sprintf("the profiling passes are %+v (%v), want the one the step queued, not one of the row's jobs", jobs, err)
		}
	}
	audit, err := l.st.ListAudit(l.ctx, testRepo, 0)
	if err != nil {
		return err.Error()
	}
	for _, nb := range ch.Baselines {
		b, err := l.st.LatestBaseline(l.ctx, testRepo, nb.Baseline.Key)
		if err != nil || b.Version != nb.Baseline.Version || b.PromotedBy != "perfgate" {
			return fmt.Sprintf("baseline %s is %+v (%v), want version %d", nb.Baseline.Key, b, err, nb.Baseline.Version)
		}
		if !slices.ContainsFunc(audit, func(e store.AuditEntry) bool {
			var d struct {
				ID int64 `json:"baseline_id"`
			}
			return e.Action == "baseline.promoted" && json.Unmarshal(e.Detail, &d) == nil && d.ID == b.ID
		}) {
			return fmt.Sprintf("no audit entry names baseline %s #%d (id %d)", b.Key, b.Version, b.ID)
		}
	}
	for _, p := range ch.Trends {
		pts, err := l.st.ListTrend(l.ctx, testRepo, p.Key, p.Metric, p.Date)
		if err != nil || len(pts) != 1 || pts[0].Value != p.Value {
			return fmt.Sprintf("trend %s %s is %+v (%v), want %v", p.Key, p.Metric, pts, err, p.Value)
		}
	}
	return ""
}

// none is "" when ok, else what is missing.
func none(ok bool, what string) string {
	if ok {
		return ""
	}
	return what
}

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// end uploads runs for a claimed job, measured on testCard, and ends it,
// without judging.
func (l *lifecycle) end(j store.Job, status jobstate.Status, reason string, runs []*result.Result) store.Job {
	l.t.Helper()
	for i, r := range runs {
		full, _ := json.Marshal(r)
		if _, _, err := l.st.PutResult(l.ctx, store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprintf("m%d", i),
			RunIndex: i, Kind: jobstate.KindMeasured, GPUUUID: testCard, Summary: full, Samples: full}); err != nil {
			l.t.Fatal(err)
		}
	}
	done, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, status, reason)
	if err != nil {
		l.t.Fatal(err)
	}
	return done
}
