package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// A delivery is stored with its payload in the statement that dedupes it:
// of ten concurrent deliveries of one ID across two replicas one is new and
// the others are redeliveries of a pending delivery; once it succeeded a
// redelivery is a duplicate; once it failed, a redelivery is processed.
func testInboxAccept(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t)
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		count = map[store.Accepted]int{}
	)
	for i := range 10 {
		st := []store.Store{e.st, other}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := st.AcceptDelivery(e.ctx, id, "pull_request", []byte(`{"action":"opened"}`), store.DeliveryOrder{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			count[a]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if count[store.AcceptedNew] != 1 || count[store.AcceptedAgain] != 9 {
		t.Fatalf("accepts = %v, want 1 new and 9 again", count)
	}
	d, err := e.st.GetDelivery(e.ctx, id)
	if err != nil || d.Status != store.DeliveryPending || string(d.Payload) != `{"action":"opened"}` || d.Event != "pull_request" || d.Redeliveries != 9 {
		t.Fatalf("stored delivery = %+v, %v", d, err)
	}
	claimed := claimDeliveries(t, e, 10)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d, want 1", len(claimed))
	}
	if err := e.st.CompleteDelivery(e.ctx, id, claimed[0].LeaseID); err != nil {
		t.Fatal(err)
	}
	if a, err := e.st.AcceptDelivery(e.ctx, id, "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil || a != store.AcceptedDuplicate {
		t.Errorf("redelivery of a done delivery = %v, %v; want duplicate", a, err)
	}
	if d, _ := e.st.GetDelivery(e.ctx, id); string(d.Payload) != `{"action":"opened"}` || d.Status != store.DeliveryDone {
		t.Errorf("a duplicate changed the done delivery: %+v", d)
	}

	// A failed delivery is processed again when GitHub redelivers it.
	if _, err := e.st.AcceptDelivery(e.ctx, "d-2", "issue_comment", []byte(`{"n":1}`), store.DeliveryOrder{}); err != nil {
		t.Fatal(err)
	}
	c := claimDeliveries(t, e, 1)
	if err := e.st.FailDelivery(e.ctx, "d-2", c[0].LeaseID, "parse payload: unexpected end"); err != nil {
		t.Fatal(err)
	}
	if got := claimDeliveries(t, e, 10); len(got) != 0 {
		t.Fatalf("a failed delivery was claimed again without a redelivery: %+v", got)
	}
	if a, err := e.st.AcceptDelivery(e.ctx, "d-2", "issue_comment", []byte(`{"n":2}`), store.DeliveryOrder{}); err != nil || a != store.AcceptedAgain {
		t.Fatalf("redelivery of a failed delivery = %v, %v; want again", a, err)
	}
	got := claimDeliveries(t, e, 10)
	if len(got) != 1 || got[0].Attempts != 1 || string(got[0].Payload) != `{"n":2}` {
		t.Errorf("after the redelivery: %+v, want the new payload on a fresh first attempt", got)
	}
}

func claimDeliveries(t *testing.T, e *env, n int) []store.Delivery {
	t.Helper()
	ds, err := e.st.ClaimDeliveries(e.ctx, n, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Claims are leased: a retried delivery waits for its time, a lapsed lease
// lets another worker take it and fences the first one out, and the order
// is oldest first.
func testInboxClaim(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	for i := range 3 {
		if _, err := e.st.AcceptDelivery(e.ctx, fmt.Sprintf("d-%d", i), "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Millisecond)
	}
	first := claimDeliveries(t, e, 2)
	if len(first) != 2 || first[0].ID != "d-0" || first[1].ID != "d-1" {
		t.Fatalf("claim order = %+v", first)
	}
	if err := e.st.RetryDelivery(e.ctx, "d-0", first[0].LeaseID, e.clock.Now().Add(time.Minute), "GitHub answered 502"); err != nil {
		t.Fatal(err)
	}
	rest := claimDeliveries(t, e, 10)
	if len(rest) != 1 || rest[0].ID != "d-2" {
		t.Fatalf("claimed %+v, want only d-2 (d-0 waits, d-1 is leased)", rest)
	}
	e.clock.Advance(2 * time.Minute) // d-0 is due, d-1's lease lapsed
	again := claimDeliveries(t, e, 10)
	ids := map[string]store.Delivery{}
	for _, d := range again {
		ids[d.ID] = d
	}
	if len(again) != 3 || ids["d-0"].Attempts != 2 || ids["d-0"].LastError != "GitHub answered 502" {
		t.Fatalf("after the backoff and lease: %+v", again)
	}
	// The worker whose lease lapsed is fenced out.
	if err := e.st.CompleteDelivery(e.ctx, "d-1", first[1].LeaseID); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("complete under a lapsed lease: %v, want ErrLeaseLost", err)
	}
	if err := e.st.CompleteDelivery(e.ctx, "d-1", ids["d-1"].LeaseID); err != nil {
		t.Errorf("complete under the current lease: %v", err)
	}
	counts, err := e.st.CountDeliveries(e.ctx)
	if err != nil || counts[store.DeliveryDone] != 1 || counts[store.DeliveryPending] != 2 {
		t.Errorf("counts = %v, %v", counts, err)
	}
}

// Two replicas claiming one inbox never take the same delivery.
func testInboxReplicas(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t)
	const n = 60
	for i := range n {
		if _, err := e.st.AcceptDelivery(e.ctx, fmt.Sprintf("d-%02d", i), "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for w := range 6 {
		st := []store.Store{e.st, other}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := st.ClaimDeliveries(e.ctx, 3, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				for _, d := range ds {
					mu.Lock()
					seen[d.ID]++
					mu.Unlock()
					if err := st.CompleteDelivery(e.ctx, d.ID, d.LeaseID); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d deliveries processed, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %s claimed %d times", id, c)
		}
	}
}

// Effects are idempotent by key, leased, retried, and finished only by
// their lease holder.
func testOutbox(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	body, _ := json.Marshal(store.CommentBody{Number: 7, Body: "hello"})
	eff := store.Effect{Key: "reply:d-1", Kind: store.EffectComment, InstallationID: 42, Repo: "acme/llm", Body: body}
	for i, want := range []bool{true, false} {
		created, err := e.st.PutEffect(e.ctx, eff)
		if err != nil || created != want {
			t.Fatalf("put #%d = %v, %v; want %v", i, created, err, want)
		}
	}
	cs, err := e.st.ClaimEffects(e.ctx, 10, time.Minute)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.EffectComment || cs[0].Attempts != 1 {
		t.Fatalf("claim = %+v, %v", cs, err)
	}
	var got store.CommentBody
	if err := json.Unmarshal(cs[0].Body, &got); err != nil || got.Body != "hello" {
		t.Fatalf("body = %s", cs[0].Body)
	}
	if err := e.st.RetryEffect(e.ctx, cs[0].ID, cs[0].LeaseID, e.clock.Now().Add(30*time.Second), "502 Bad Gateway"); err != nil {
		t.Fatal(err)
	}
	if cs, _ := e.st.ClaimEffects(e.ctx, 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed before its retry time: %+v", cs)
	}
	e.clock.Advance(31 * time.Second)
	cs, err = e.st.ClaimEffects(e.ctx, 10, time.Minute)
	if err != nil || len(cs) != 1 || cs[0].Attempts != 2 || cs[0].LastError != "502 Bad Gateway" {
		t.Fatalf("retry claim = %+v, %v", cs, err)
	}
	if err := e.st.CompleteEffect(e.ctx, cs[0].ID, "not-the-lease", cs[0].Version); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("complete with a wrong lease: %v", err)
	}
	if err := e.st.CompleteEffect(e.ctx, cs[0].ID, cs[0].LeaseID, cs[0].Version); err != nil {
		t.Fatal(err)
	}
	done, err := e.st.GetEffect(e.ctx, "reply:d-1")
	if err != nil || done.Status != store.EffectDone || done.DoneAt.IsZero() {
		t.Errorf("after completion: %+v, %v", done, err)
	}
	// A write GitHub refuses for good is failed and not claimed again.
	if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: "react:1", Kind: store.EffectReaction, Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	cs, _ = e.st.ClaimEffects(e.ctx, 10, time.Minute)
	if err := e.st.FailEffect(e.ctx, cs[0].ID, cs[0].LeaseID, cs[0].Version, "422 Validation Failed"); err != nil {
		t.Fatal(err)
	}
	failed, err := e.st.ListEffects(e.ctx, store.EffectFilter{Status: store.EffectFailed})
	if err != nil || len(failed) != 1 || failed[0].LastError != "422 Validation Failed" {
		t.Errorf("failed effects = %+v, %v", failed, err)
	}
}

// A check row changed while its sync is being sent is sent again: the
// completion of the older version leaves the row pending.
func testOutboxRearm(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha40("1"), Tier: "quick", PRNumber: 7, InstallationID: 42,
		State: store.CheckQueued, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}})
	if err != nil || !ok {
		t.Fatalf("create = %v, %v", ok, err)
	}
	cs, err := e.st.ClaimEffects(e.ctx, 10, time.Minute)
	if err != nil || len(cs) != 1 || cs[0].Kind != store.EffectCheckSync || cs[0].Key != store.CheckSyncKey(cr.ID) {
		t.Fatalf("claim = %+v, %v", cs, err)
	}
	// The job starts while the queued state is being sent.
	if _, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, State: store.CheckInProgress,
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "in_progress"}}); err != nil || !ok {
		t.Fatalf("start = %v, %v", ok, err)
	}
	if err := e.st.CompleteEffect(e.ctx, cs[0].ID, cs[0].LeaseID, cs[0].Version); err != nil {
		t.Fatal(err)
	}
	again, err := e.st.ClaimEffects(e.ctx, 10, time.Minute)
	if err != nil || len(again) != 1 || again[0].Version != cs[0].Version+1 {
		t.Fatalf("after a change during the send: %+v, %v; want the sync pending at the next version", again, err)
	}
	current, err := e.st.CheckSynced(e.ctx, cr.ID, 0, 555, 2)
	if err != nil || !current {
		t.Fatalf("synced = %v, %v", current, err)
	}
	row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID)
	if row.GitHubID != 555 || row.SyncedVersion != 2 || row.DesiredVersion != 2 || row.Desired.Status != "in_progress" {
		t.Errorf("row after sync = %+v", row)
	}
}

func sha40(c string) string {
	out := ""
	for range 40 {
		out += c
	}
	return out
}

// ApplyCheck is a compare-and-set: of two replicas making the same step one
// wins, and only the winner's jobs, comment and audit entry exist.
func testApplyCheck(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t)
	sha := sha40("a")
	cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", PRNumber: 7, InstallationID: 42,
		State: store.CheckQueued, AddJobs: []store.JobSpec{{Repo: "acme/llm", Tier: "quick", HeadSHA: sha}}, RequestKey: "d-1",
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}})
	if err != nil || !ok || len(cr.JobIDs) != 1 || cr.RequestKey != "d-1" || cr.DesiredVersion != 1 {
		t.Fatalf("create = %+v, %v, %v", cr, ok, err)
	}
	if _, ok, err := other.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", State: store.CheckQueued}); err != nil || ok {
		t.Fatalf("second create of the same row = %v, %v; want not applied", ok, err)
	}
	body, _ := json.Marshal(store.CommentBody{Number: 7, Body: "warning"})
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	for i := range 6 {
		st := []store.Store{e.st, other}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, FromGeneration: cr.Generation,
				State: store.CheckWarned, Deadline: e.clock.Now().Add(48 * time.Hour), Verdict: json.RawMessage(`{"v":1}`),
				Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "completed", Conclusion: "neutral"},
				Effects: []store.Effect{{Key: fmt.Sprintf("warn:%d", i), Kind: store.EffectComment, Body: body}},
				Audit:   []store.AuditEntry{{Actor: "perfgate", Action: "gate.regression", Repo: "acme/llm", PRNumber: 7}}})
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d replicas won the same transition, want 1", won)
	}
	comments, _ := e.st.ListEffects(e.ctx, store.EffectFilter{Kind: store.EffectComment})
	audit, _ := e.st.ListAudit(e.ctx, "acme/llm", 7)
	if len(comments) != 1 || len(audit) != 1 {
		t.Errorf("%d comments and %d audit entries, want one each", len(comments), len(audit))
	}
	row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID)
	if row.State != store.CheckWarned || row.Deadline.IsZero() || string(row.Verdict) == "" || row.DesiredVersion != 2 || row.Desired.Conclusion != "neutral" {
		t.Errorf("row = %+v", row)
	}
	// Cancelling jobs in the same step.
	if _, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckWarned, State: store.CheckWarned,
		CancelJobs: cr.JobIDs, CancelReason: "PR closed"}); err != nil || !ok {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	if j, _ := e.st.GetJob(e.ctx, cr.JobIDs[0]); j.Status != jobstate.Cancelled || j.FailureReason != "PR closed" {
		t.Errorf("job after the cancel: %s %q", j.Status, j.FailureReason)
	}
}

// A judgement's step carries everything the judgement writes: the base
// commit's job (recorded on the row as baseline_job, not one of its jobs),
// a regression's profiling pass (not one of its jobs either),
// first baselines with their audit entries, and trend points — all or
// nothing. A baseline version another promotion took meanwhile rolls the
// whole step back as a lost race.
func testApplyCheckCarries(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	sha := sha40("c")
	cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha, Tier: "quick", PRNumber: 7, InstallationID: 42,
		State: store.CheckInProgress, AddJobs: []store.JobSpec{{Repo: "acme/llm", Tier: "quick", HeadSHA: sha}}})
	if err != nil || !ok {
		t.Fatalf("create = %v, %v", ok, err)
	}
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	first := func(key string, version int) store.NewBaseline {
		return store.NewBaseline{
			Baseline: store.Baseline{Repo: "acme/llm", Key: key, Version: version, Commit: sha, GPU: "NVIDIA H100 80GB HBM3",
				LoadParams: json.RawMessage(`{"request_rate": 8}`), Runs: json.RawMessage(`[{"output_throughput": 1000}]`), PromotedBy: "perfgate"},
			Audit: func(b store.Baseline) ([]store.AuditEntry, error) {
				d, err := json.Marshal(map[string]any{"baseline_id": b.ID, "key": b.Key, "version": b.Version})
				return []store.AuditEntry{{Actor: "perfgate", Action: "baseline.promoted", Repo: b.Repo, Detail: d}}, err
			},
		}
	}
	step := func(from string, bs ...store.NewBaseline) (store.CheckRun, bool, error) {
		return e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: from, State: store.CheckInProgress,
			Verdict:    json.RawMessage(`{"notes":["measuring the base"],"baseline_job":0}`),
			BaseJob:    &store.JobSpec{Repo: "acme/llm", Tier: "quick", Kind: "baseline", HeadSHA: sha40("d"), GPUUUID: "GPU-a"},
			ProfileJob: &store.JobSpec{Repo: "acme/llm", Tier: "profile", Kind: "profile", PRNumber: 7, HeadSHA: sha, BaseSHA: sha40("d")},
			Baselines:  bs,
			Trends:     []store.TrendPoint{{Repo: "acme/llm", Key: "nightly/c=1", Metric: "output_throughput", Date: day, Value: 1000, JobID: cr.JobIDs[0]}},
		})
	}
	// Another promotion took version 1 of "nightly/c=16" since the
	// history was read: nothing of the step is written.
	if _, err := e.st.PutBaseline(e.ctx, first("nightly/c=16", 1).Baseline); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := step(store.CheckInProgress, first("nightly/c=1", 1), first("nightly/c=16", 1)); err != nil || ok {
		t.Fatalf("a step with a taken baseline version = %v, %v; want not applied", ok, err)
	}
	jobs, _ := e.st.ListJobs(e.ctx, store.JobFilter{Repo: "acme/llm"})
	pts, _ := e.st.ListTrend(e.ctx, "acme/llm", "nightly/c=1", "output_throughput", day)
	audit, _ := e.st.ListAudit(e.ctx, "acme/llm", 0)
	if _, err := e.st.LatestBaseline(e.ctx, "acme/llm", "nightly/c=1"); !errors.Is(err, store.ErrNotFound) || len(jobs) != 1 || len(pts) != 0 || len(audit) != 0 {
		t.Errorf("after the lost step: baseline c=1 %v, %d jobs, %d trend points, %d audit entries; want none written", err, len(jobs), len(pts), len(audit))
	}
	// A baseline without its version is refused: the step's version is
	// what makes a concurrent promotion a conflict.
	if _, _, err := step(store.CheckInProgress, first("nightly/c=1", 0)); err == nil {
		t.Error("a step's baseline without a version was accepted")
	}

	row, ok, err := step(store.CheckInProgress, first("nightly/c=1", 1), first("nightly/c=16", 2))
	if err != nil || !ok {
		t.Fatalf("step = %v, %v", ok, err)
	}
	var doc struct {
		Notes       []string `json:"notes"`
		BaselineJob int64    `json:"baseline_job"`
	}
	if err := json.Unmarshal(row.Verdict, &doc); err != nil || doc.BaselineJob == 0 || len(doc.Notes) != 1 {
		t.Fatalf("verdict = %s (%v); want the document with the base commit's job", row.Verdict, err)
	}
	base, err := e.st.GetJob(e.ctx, doc.BaselineJob)
	if err != nil || base.Kind != "baseline" || base.CheckRunID != cr.ID || base.GPUUUID != "GPU-a" || base.Status != jobstate.Queued ||
		slices.Contains(row.JobIDs, base.ID) || len(row.JobIDs) != 1 {
		t.Errorf("base commit's job = %+v (%v), row's jobs %v; want it queued for the row, not one of its jobs", base, err, row.JobIDs)
	}
	audit, _ = e.st.ListAudit(e.ctx, "acme/llm", 0)
	for i, key := range []string{"nightly/c=1", "nightly/c=16"} {
		b, err := e.st.LatestBaseline(e.ctx, "acme/llm", key)
		if err != nil || b.Version != i+1 {
			t.Errorf("baseline %s = %+v, %v", key, b, err)
			continue
		}
		var d struct {
			ID int64 `json:"baseline_id"`
		}
		if i >= len(audit) || json.Unmarshal(audit[i].Detail, &d) != nil || d.ID != b.ID || audit[i].Action != "baseline.promoted" {
			t.Errorf("audit = %+v; want entry %d to name baseline %d", audit, i, b.ID)
		}
	}
	if pts, err := e.st.ListTrend(e.ctx, "acme/llm", "nightly/c=1", "output_throughput", day); err != nil || len(pts) != 1 || pts[0].Value != 1000 {
		t.Errorf("trend = %+v, %v", pts, err)
	}
	profiles, err := e.st.ListJobs(e.ctx, store.JobFilter{Repo: "acme/llm", Tier: "profile"})
	if err != nil || len(profiles) != 1 || profiles[0].Kind != "profile" || profiles[0].CheckRunID != 0 || profiles[0].Status != jobstate.Queued ||
		profiles[0].BaseSHA != sha40("d") || slices.Contains(row.JobIDs, profiles[0].ID) {
		t.Errorf("profiling passes = %+v (%v); want the one the step queued, not one of the row's jobs", profiles, err)
	}
}

// A new generation reports to a new GitHub check run: the old one, open on
// GitHub, is queued for cancelling; a creation that was attempted but never
// recorded is looked up; a check run created for a generation that moved on
// is cancelled when its creation is recorded.
func testApplyCheckReplaced(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	cr, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha40("b"), Tier: "quick", PRNumber: 7, InstallationID: 42,
		State: store.CheckQueued, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CheckSynced(e.ctx, cr.ID, 0, 900, 1); err != nil {
		t.Fatal(err)
	}
	next, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, State: store.CheckQueued,
		NewGeneration: true, CancelOld: &store.CheckCancelBody{Title: "Replaced", Summary: "a retest replaced it"},
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}})
	if err != nil || !ok || next.Generation != 1 || next.GitHubID != 0 {
		t.Fatalf("new generation = %+v, %v, %v", next, ok, err)
	}
	cancel, err := e.st.GetEffect(e.ctx, fmt.Sprintf("cancel:%d.0", cr.ID))
	if err != nil {
		t.Fatalf("no cancel of the replaced run: %v", err)
	}
	var body store.CheckCancelBody
	if err := json.Unmarshal(cancel.Body, &body); err != nil || body.GitHubID != 900 || body.Name != "perfgate / quick" || body.Title != "Replaced" {
		t.Errorf("cancel body = %+v, %v", body, err)
	}
	// Generation 1's creation is attempted, its answer lost, and a retest
	// replaces it: the cancel looks the run up by external ID.
	if err := e.st.MarkCheckCreateAttempt(e.ctx, cr.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, FromGeneration: 1, State: store.CheckQueued,
		NewGeneration: true, CancelOld: &store.CheckCancelBody{Title: "Replaced"}, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}}); err != nil {
		t.Fatal(err)
	}
	lost, err := e.st.GetEffect(e.ctx, fmt.Sprintf("cancel:%d.1", cr.ID))
	if err != nil {
		t.Fatalf("no cancel of the run whose creation was lost: %v", err)
	}
	if err := json.Unmarshal(lost.Body, &body); err != nil || body.GitHubID != 0 || body.ExternalID != store.ExternalID(7, cr.ID, 1) || body.HeadSHA != sha40("b") {
		t.Errorf("lookup cancel body = %+v", body)
	}
	// The creation of generation 1 answers after all: that run is orphaned.
	current, err := e.st.CheckSynced(e.ctx, cr.ID, 1, 901, 3)
	if err != nil || current {
		t.Fatalf("synced for a replaced generation = %v, %v; want not current", current, err)
	}
	if row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID); row.GitHubID != 0 || row.Generation != 2 {
		t.Errorf("a stale creation was recorded on the row: %+v", row)
	}
	// A completed check that GitHub shows completed needs no cancel.
	done, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/llm", HeadSHA: sha40("c"), Tier: "quick", State: store.CheckSkipped,
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "completed", Conclusion: "skipped"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CheckSynced(e.ctx, done.ID, 0, 950, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: done.ID, From: store.CheckSkipped, State: store.CheckQueued,
		NewGeneration: true, CancelOld: &store.CheckCancelBody{Title: "Replaced"}, Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "queued"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.GetEffect(e.ctx, fmt.Sprintf("cancel:%d.0", done.ID)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a completed run was queued for cancelling: %v", err)
	}
}

// A new run that replaces an open one stops the old run's jobs in the same
// step: the queued one is cancelled before it ran and refunded (the new job
// lines up exactly where it would had the old one been cancelled on its
// own first), the running one is asked to stop, and the row reports to
// the new job alone.
func testApplyCheckReplacedJobs(t *testing.T, newDSN func(t testing.TB) string) {
	spec := store.JobSpec{Repo: "acme/llm", Tier: "quick", HeadSHA: sha40("d"), PRNumber: 7, InstallationID: 42}
	// open queues the first run's two jobs and starts one.
	open := func(e *env) (cr store.CheckRun, running, queued int64) {
		cr, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: spec.Repo, HeadSHA: spec.HeadSHA, Tier: spec.Tier, PRNumber: 7, InstallationID: 42,
			State: store.CheckQueued, AddJobs: []store.JobSpec{spec, spec}})
		if err != nil || !ok || len(cr.JobIDs) != 2 {
			t.Fatalf("first run = %+v, %v, %v", cr, ok, err)
		}
		running = e.claim(t, nil, nil, time.Minute).ID
		queued = cr.JobIDs[0]
		if queued == running {
			queued = cr.JobIDs[1]
		}
		return cr, running, queued
	}

	e := newEnv(t, newDSN)
	cr, running, queued := open(e)
	next, ok, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, State: store.CheckQueued,
		NewGeneration: true, CancelOld: &store.CheckCancelBody{Title: "Replaced by a newer run"},
		JobIDs: []int64{}, AddJobs: []store.JobSpec{spec}, CancelJobs: cr.JobIDs, CancelReason: "replaced by a newer run"})
	if err != nil || !ok || len(next.JobIDs) != 1 || slices.Contains(cr.JobIDs, next.JobIDs[0]) {
		t.Fatalf("replacement = %+v, %v, %v; want the row on one new job", next, ok, err)
	}
	if j, err := e.st.GetJob(e.ctx, queued); err != nil || j.Status != jobstate.Cancelled || j.Attempts != 0 || j.FailureReason != "replaced by a newer run" {
		t.Errorf("the replaced run's queued job: %s after %d attempts (%q), %v; want cancelled before it ran, saying why", j.Status, j.Attempts, j.FailureReason, err)
	}
	if j, err := e.st.GetJob(e.ctx, running); err != nil || j.Status != jobstate.Running || !j.CancelRequested {
		t.Errorf("the replaced run's running job: %s, cancel requested %v, %v; want running and told to stop", j.Status, j.CancelRequested, err)
	}
	fresh, err := e.st.GetJob(e.ctx, next.JobIDs[0])
	if err != nil || fresh.Status != jobstate.Queued {
		t.Fatalf("the new run's job: %+v, %v", fresh, err)
	}

	// The same, one step at a time: the refund is the fleet's own.
	c := newEnv(t, newDSN)
	_, _, cq := open(c)
	if _, err := c.st.CancelJob(c.ctx, cq, "cancelled"); err != nil {
		t.Fatal(err)
	}
	want := c.enqueue(t, spec)
	if math.Abs(fresh.VTag-want.VTag) > 1e-9 {
		t.Errorf("the new run's job lines up at %v, want %v (the cancelled job refunded, as a cancel on its own is)", fresh.VTag, want.VTag)
	}
}

// Every way a job ends leaves it waiting to be judged until a worker says
// it judged it; a retried judgement waits for its time.
func testJudge(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	a := e.enqueue(t, store.JobSpec{})
	b := e.enqueue(t, store.JobSpec{})
	c := e.enqueue(t, store.JobSpec{})
	ja := e.claim(t, nil, nil, time.Minute)
	if _, err := e.st.Finish(e.ctx, ja.ID, ja.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CancelJob(e.ctx, c.ID, "superseded"); err != nil {
		t.Fatal(err)
	}
	claims, err := e.st.ClaimFinishedJobs(e.ctx, 10, time.Minute)
	if err != nil || len(claims) != 2 || claims[0].ID != a.ID || claims[1].ID != c.ID || claims[0].Attempt != 1 {
		t.Fatalf("claims = %+v, %v (b is still queued)", claims, err)
	}
	if err := e.st.JobJudged(e.ctx, a.ID, claims[0].LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RetryJudge(e.ctx, c.ID, claims[1].LeaseID, e.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.st.ClaimFinishedJobs(e.ctx, 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %+v: a judged job, or one before its retry time", got)
	}
	e.clock.Advance(2 * time.Minute)
	got, err := e.st.ClaimFinishedJobs(e.ctx, 10, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != c.ID || got[0].Attempt != 2 {
		t.Fatalf("after the retry time: %+v, %v", got, err)
	}
	if err := e.st.JobJudged(e.ctx, c.ID, "stale"); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("judged under a wrong lease: %v", err)
	}
	if j, _ := e.st.GetJob(e.ctx, a.ID); j.JudgedAt.IsZero() {
		t.Error("judged job has no JudgedAt")
	}
	_ = b
}

// Closing a PR cancels all its queued jobs and signals its running ones,
// whatever their head.
func testCancelPRJobs(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	running := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: sha40("1")})
	e.claim(t, nil, nil, time.Minute)
	queued := e.enqueue(t, store.JobSpec{PRNumber: 7, HeadSHA: sha40("2")})
	otherPR := e.enqueue(t, store.JobSpec{PRNumber: 8, HeadSHA: sha40("2")})
	sup, err := e.st.CancelPRJobs(e.ctx, "acme/llm", 7, "PR closed")
	if err != nil {
		t.Fatal(err)
	}
	if len(sup.Cancelled) != 1 || sup.Cancelled[0].ID != queued.ID || len(sup.Signalled) != 1 || sup.Signalled[0].ID != running.ID {
		t.Errorf("cancelled %v, signalled %v", sup.Cancelled, sup.Signalled)
	}
	if j, _ := e.st.GetJob(e.ctx, otherPR.ID); j.Status != jobstate.Queued {
		t.Errorf("another PR's job: %s", j.Status)
	}
	if j, _ := e.st.GetJob(e.ctx, queued.ID); j.FailureReason != "PR closed" {
		t.Errorf("reason %q", j.FailureReason)
	}
}

// A restarted server frees the leases it held when it died (they carry its
// instance name) and claims that work again at once; another instance's
// leases stay until they lapse.
func testReclaimLeases(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	open := func(instance string) store.Store {
		st, err := store.Open(e.ctx, e.dsn, store.WithClock(e.clock.Now), store.WithInstance(instance))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open("host-a"), open("host-b")
	body, _ := json.Marshal(store.CommentBody{Number: 1, Body: "x"})
	for i, st := range []store.Store{a, b} {
		if _, err := st.AcceptDelivery(e.ctx, fmt.Sprintf("d-%d", i), "pull_request", []byte(`{}`), store.DeliveryOrder{}); err != nil {
			t.Fatal(err)
		}
		if ds, err := st.ClaimDeliveries(e.ctx, 1, 3*time.Minute); err != nil || len(ds) != 1 {
			t.Fatalf("claim delivery: %v %v", ds, err)
		}
		if _, err := st.PutEffect(e.ctx, store.Effect{Key: fmt.Sprintf("c-%d", i), Kind: store.EffectComment, InstallationID: 1, Repo: "acme/llm", Body: body}); err != nil {
			t.Fatal(err)
		}
		if es, err := st.ClaimEffects(e.ctx, 1, 2*time.Minute); err != nil || len(es) != 1 {
			t.Fatalf("claim effect: %v %v", es, err)
		}
	}
	// host-a dies and restarts a second later.
	e.clock.Advance(time.Second)
	restarted := open("host-a")
	got, err := restarted.ReclaimLeases(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Deliveries != 1 || got.Effects != 1 {
		t.Fatalf("reclaimed %+v, want host-a's delivery and write", got)
	}
	ds, err := restarted.ClaimDeliveries(e.ctx, 10, 3*time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != "d-0" {
		t.Errorf("claimable after the restart: %+v %v, want d-0 only (d-1 is host-b's, alive)", ds, err)
	}
	es, err := restarted.ClaimEffects(e.ctx, 10, 2*time.Minute)
	if err != nil || len(es) != 1 || es[0].Key != "c-0" {
		t.Errorf("writes claimable after the restart: %+v %v, want c-0 only", es, err)
	}
	if none, err := open("").ReclaimLeases(e.ctx); err != nil || none != (store.Reclaimed{}) {
		t.Errorf("a store without an instance name reclaimed %+v, %v", none, err)
	}
}
