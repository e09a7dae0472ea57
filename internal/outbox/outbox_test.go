package outbox

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/backoff"
	"github.com/perfgate/perfgate/internal/githubtest"
	"github.com/perfgate/perfgate/internal/store"
)

const sha = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type env struct {
	t     *testing.T
	ctx   context.Context
	gh    *githubtest.Server
	st    store.Store
	clock *clock
	s     *Sender
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), gh: githubtest.New(t), clock: &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}}
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(e.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	clients, err := app.NewClientCreator(e.gh.AppConfig(), 5*time.Second, app.RetryPolicy{MaxAttempts: 1, MaxRateLimitWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.s = New(Options{Store: st, Clients: clients, Now: e.clock.now, Log: zerolog.Nop(), Policy: backoff.Policy{Base: time.Second, Max: time.Minute}})
	return e
}

// pass runs one outbox pass.
func (e *env) pass() int {
	e.t.Helper()
	n, err := e.s.Pass(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) newCheck(state, status, conclusion string) store.CheckRun {
	e.t.Helper()
	cr, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{Repo: "acme/inference", HeadSHA: sha, Tier: "quick", PRNumber: 17,
		InstallationID: githubtest.InstallationID, State: state,
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: status, Conclusion: conclusion, Title: "t", Summary: "s"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return cr
}

// A check row is created on GitHub with its external ID, then brought to
// each new desired state; the row records what GitHub confirmed.
func TestCheckCreatedThenUpdated(t *testing.T) {
	e := newEnv(t)
	cr := e.newCheck(store.CheckQueued, "queued", "")
	e.pass()
	runs := e.gh.CheckRuns()
	if len(runs) != 1 || runs[0].Status != "queued" || runs[0].ExternalID != store.ExternalID(17, cr.ID, 0) {
		t.Fatalf("runs = %+v", runs)
	}
	if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, State: store.CheckPassed,
		Desired: &store.CheckOutput{Name: "perfgate / quick", Status: "completed", Conclusion: "success", Title: "ok", Summary: "fine",
			Actions: []store.CheckAction{{Label: "Retest", Description: "again", Identifier: "retest"}}}}); err != nil {
		t.Fatal(err)
	}
	e.pass()
	runs = e.gh.CheckRuns()
	if len(runs) != 1 || runs[0].Conclusion != "success" || runs[0].Title != "ok" || len(runs[0].Actions) != 1 {
		t.Fatalf("after the update: %+v", runs)
	}
	row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID)
	if row.GitHubID != runs[0].ID || row.SyncedVersion != row.DesiredVersion {
		t.Errorf("row = %+v", row)
	}
	if e.pass() != 0 {
		t.Error("a synced row was sent again")
	}
}

// GitHub created the run but the answer was lost (a crash, a timeout): the
// next attempt finds it by its external ID instead of creating a second.
func TestLostCreateAnswerFindsTheRun(t *testing.T) {
	e := newEnv(t)
	cr := e.newCheck(store.CheckQueued, "queued", "")
	if err := e.st.MarkCheckCreateAttempt(e.ctx, cr.ID, cr.Generation); err != nil {
		t.Fatal(err)
	}
	clients, _ := app.NewClientCreator(e.gh.AppConfig(), 5*time.Second, app.RetryPolicy{MaxAttempts: 1})
	client, _ := clients.NewInstallationClient(githubtest.InstallationID)
	made, _, err := client.Checks.CreateCheckRun(e.ctx, "acme", "inference", github.CreateCheckRunOptions{
		Name: "perfgate / quick", HeadSHA: sha, ExternalID: github.String(store.ExternalID(17, cr.ID, cr.Generation))})
	if err != nil {
		t.Fatal(err)
	}
	e.pass()
	if runs := e.gh.CheckRuns(); len(runs) != 1 {
		t.Fatalf("%d check runs, want the one created before the answer was lost", len(runs))
	}
	if row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID); row.GitHubID != made.GetID() {
		t.Errorf("row adopted %d, want %d", row.GitHubID, made.GetID())
	}
}

// 502s and a secondary rate limit are retried later, the rate limit after
// the Retry-After GitHub asked for; a 422 is given up on and recorded.
func TestRetriesAndRefusals(t *testing.T) {
	e := newEnv(t)
	e.gh.FailNext("POST", "/repos/acme/inference/check-runs", 2, http.StatusBadGateway, nil)
	cr := e.newCheck(store.CheckQueued, "queued", "")
	for i := 0; i < 2; i++ {
		e.pass()
		e.clock.add(time.Minute)
	}
	e.pass()
	if runs := e.gh.CheckRuns(); len(runs) != 1 {
		t.Fatalf("after two 502s: %d runs, want 1", len(runs))
	}

	h := http.Header{}
	h.Set("Retry-After", "90")
	e.gh.FailNext("POST", "/repos/acme/inference/issues/17/comments", 1, http.StatusForbidden, h)
	body, _ := json.Marshal(store.CommentBody{Number: 17, Body: "hello"})
	if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: "c1", Kind: store.EffectComment, InstallationID: githubtest.InstallationID, Repo: "acme/inference", Body: body}); err != nil {
		t.Fatal(err)
	}
	e.pass()
	eff, _ := e.st.GetEffect(e.ctx, "c1")
	if wait := eff.NextAttemptAt.Sub(e.clock.now()); eff.Status != store.EffectPending || wait < 90*time.Second {
		t.Fatalf("after a Retry-After of 90 s: %s, next attempt in %v", eff.Status, wait)
	}
	e.clock.add(91 * time.Second)
	e.pass()
	if cs := e.gh.Comments(); len(cs) != 1 || cs[0].Body != "hello" {
		t.Fatalf("comments = %+v", cs)
	}

	// A comment GitHub rejects (over 65,536 characters would be cut; an
	// unknown reaction is a 422) is failed, not retried forever.
	react, _ := json.Marshal(store.ReactionBody{CommentID: 5, Content: "party-parrot"})
	if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: "r1", Kind: store.EffectReaction, InstallationID: githubtest.InstallationID, Repo: "acme/inference", Body: react}); err != nil {
		t.Fatal(err)
	}
	e.pass()
	if eff, _ := e.st.GetEffect(e.ctx, "r1"); eff.Status != store.EffectFailed || !strings.Contains(eff.LastError, "422") {
		t.Errorf("rejected reaction: %s %q", eff.Status, eff.LastError)
	}
	_ = cr
}

// A check run replaced while its creation was in flight is cancelled when
// its creation is recorded, and never adopted by the new generation.
func TestStaleCreationCancelled(t *testing.T) {
	e := newEnv(t)
	cr := e.newCheck(store.CheckQueued, "queued", "")
	claimed, err := e.st.ClaimEffects(e.ctx, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	// A retest replaces the row while the sender is about to create.
	if _, _, err := e.st.ApplyCheck(e.ctx, store.CheckChange{ID: cr.ID, From: store.CheckQueued, State: store.CheckQueued, NewGeneration: true,
		CancelOld: &store.CheckCancelBody{Title: "Replaced", Summary: "a retest"},
		Desired:   &store.CheckOutput{Name: "perfgate / quick", Status: "queued", Title: "again", Summary: "s"}}); err != nil {
		t.Fatal(err)
	}
	// The sender creates for the generation it read... (simulated: it read
	// generation 0 before the change)
	clients, _ := app.NewClientCreator(e.gh.AppConfig(), 5*time.Second, app.RetryPolicy{MaxAttempts: 1})
	client, _ := clients.NewInstallationClient(githubtest.InstallationID)
	old, _, err := client.Checks.CreateCheckRun(e.ctx, "acme", "inference", github.CreateCheckRunOptions{Name: "perfgate / quick", HeadSHA: sha, Status: github.String("queued")})
	if err != nil {
		t.Fatal(err)
	}
	if current, err := e.st.CheckSynced(e.ctx, cr.ID, 0, old.GetID(), 1); err != nil || current {
		t.Fatalf("stale creation recorded as current: %v %v", current, err)
	}
	if err := e.st.RetryEffect(e.ctx, claimed[0].ID, claimed[0].LeaseID, e.clock.now(), "test"); err != nil {
		t.Fatal(err)
	}
	for e.pass() > 0 {
	}
	byID := map[int64]githubtest.CheckRun{}
	for _, r := range e.gh.CheckRuns() {
		byID[r.ID] = r
	}
	if r := byID[old.GetID()]; r.Conclusion != "cancelled" {
		t.Errorf("the orphaned run: %s/%s, want cancelled", r.Status, r.Conclusion)
	}
	row, _ := e.st.GetCheckRunByID(e.ctx, cr.ID)
	if row.GitHubID == 0 || row.GitHubID == old.GetID() || byID[row.GitHubID].Title != "again" {
		t.Errorf("the row reports to %d, want a new run titled \"again\" (%v)", row.GitHubID, byID)
	}
}
