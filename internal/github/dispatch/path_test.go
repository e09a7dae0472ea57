package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
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
}

// judged is the mark the wrapped judgement leaves in the log.
const judged = "<judge>"

// writes are the store's methods the judge path may write with.
var writes = []string{"PutBaseline", "AppendAudit", "CancelJob", "Enqueue", "ApplyCheck", "PutEffect", "PutTrend"}

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

func (c *callLog) CancelJob(ctx context.Context, id int64, reason string) (store.Job, error) {
	c.add("CancelJob")
	return c.Store.CancelJob(ctx, id, reason)
}

func (c *callLog) Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error) {
	c.add("Enqueue")
	return c.Store.Enqueue(ctx, spec)
}

func (c *callLog) ApplyCheck(ctx context.Context, ch store.CheckChange) (store.CheckRun, bool, error) {
	c.add("ApplyCheck")
	return c.Store.ApplyCheck(ctx, ch)
}

func (c *callLog) PutEffect(ctx context.Context, e store.Effect) (bool, error) {
	c.add("PutEffect")
	return c.Store.PutEffect(ctx, e)
}

func (c *callLog) PutTrend(ctx context.Context, p store.TrendPoint) error {
	c.add("PutTrend")
	return c.Store.PutTrend(ctx, p)
}

// A finished job's path through the judge is one load (reads only), one
// pure judgement (no store call while it runs), and one store step: for a
// verdict, runs to add or a failure, that step is the one ApplyCheck that
// changes the check with its effects and jobs in one transaction. The log
// would show a write moved into the load, a second judgement, a read
// after the judgement that fed it, or a write of its own beside the step.
func TestFinishedJobPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(l *lifecycle) store.Job // finishes a job, unjudged
		// after is every call the log records after the judgement.
		after []string
	}{
		{"verdict", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(5))
		}, []string{"ApplyCheck"}},
		{"runs added", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", scaled(1, 1.2, 0.8))
		}, []string{"ListResults", "ApplyCheck"}}, // the card the runs ran on (cardOf), then the step
		{"engine failed", func(l *lifecycle) store.Job {
			l.baseline(1)
			l.request(headSHA, false)
			return l.end(l.claim(), jobstate.Failed, "engine never became ready: /health timed out", nil)
		}, []string{"ApplyCheck"}},
		{"no baseline", func(l *lifecycle) store.Job {
			l.request(newSHA, false)
			return l.end(l.claim(), jobstate.Succeeded, "", quickRuns(3))
		}, []string{"ListResults", "Enqueue", "ApplyCheck"}}, // the card, the base commit's job on it, then the step
		// A nightly matrix also stores each cell's trend and promotes a
		// new cell's first runs (reading the key's history to do so)
		// before its one step: after is nil, and the test asks only that
		// those writes come after the judgement and the step comes last.
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
		}, nil},
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
			got := log.calls[at+1:]
			switch {
			case tc.after != nil && !slices.Equal(got, tc.after):
				t.Errorf("after the judgement the store saw %v, want %v (all: %v)", got, tc.after, log.calls)
			case tc.after == nil && (len(got) == 0 || got[len(got)-1] != "ApplyCheck" || !slices.Contains(got, "PutTrend") || !slices.Contains(got, "PutBaseline")):
				t.Errorf("after the judgement the store saw %v, want the trends, the first baselines and the step last", got)
			}
		})
	}
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

// end uploads runs for a claimed job and ends it, without judging.
func (l *lifecycle) end(j store.Job, status jobstate.Status, reason string, runs []*result.Result) store.Job {
	l.t.Helper()
	for i, r := range runs {
		upload(l.t, l.st, j, i, r)
	}
	done, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, status, reason)
	if err != nil {
		l.t.Fatal(err)
	}
	return done
}
