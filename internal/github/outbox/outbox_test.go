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

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
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
	return newEnvPolicy(t, app.RetryPolicy{MaxAttempts: 1, MaxRateLimitWait: time.Second})
}

// newEnvPolicy is newEnv with the transport's retry policy.
func newEnvPolicy(t *testing.T, p app.RetryPolicy) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), gh: ghtest.New(t), clock: &clock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}}
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(e.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	if p.Now == nil {
		p.Now = e.clock.now // X-RateLimit-Reset is read on the test's clock
	}
	clients, err := app.NewClientCreator(e.gh.AppConfig(), 5*time.Second, p)
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
	if cs := e.gh.Comments(); len(cs) != 1 || !strings.HasPrefix(cs[0].Body, "hello\n<!-- perfgate-outbox:") {
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

// GitHub applies a write and its answer is lost (the proxy in githubtest
// answers 502 after applying it). With the production retry policy in the
// transport, the outbox looks the effect up before sending again and adopts
// it: one check run that reaches its final state, one comment, one
// reaction — and every row done.
func TestLostAnswersAdopted(t *testing.T) {
	tests := []struct {
		name string
		path string
		put  func(e *env) // writes the row
		want func(t *testing.T, e *env)
	}{
		{"check run", "/repos/acme/inference/check-runs", func(e *env) { e.newCheck(store.CheckQueued, "queued", "") },
			func(t *testing.T, e *env) {
				runs := e.gh.CheckRuns()
				if len(runs) != 1 {
					t.Fatalf("%d check runs, want 1: %+v", len(runs), runs)
				}
				row, _ := e.st.GetCheckRunByID(e.ctx, 1)
				if row.GitHubID != runs[0].ID {
					t.Errorf("row reports to %d, want the run GitHub made (%d)", row.GitHubID, runs[0].ID)
				}
			}},
		{"comment", "/repos/acme/inference/issues/17/comments", func(e *env) { e.putComment("warn:1", 17, "perfgate warns @octocat") },
			func(t *testing.T, e *env) {
				cs := e.gh.Comments()
				if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, "perfgate warns @octocat") {
					t.Fatalf("comments = %+v, want one", cs)
				}
			}},
		{"reaction", "/repos/acme/inference/issues/comments/5/reactions", func(e *env) {
			react, _ := json.Marshal(store.ReactionBody{CommentID: 5, Content: "eyes"})
			if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: "r1", Kind: store.EffectReaction, InstallationID: githubtest.InstallationID, Repo: "acme/inference", Body: react}); err != nil {
				e.t.Fatal(err)
			}
		}, func(t *testing.T, e *env) {
			if got := e.gh.Reactions("acme/inference", 5); len(got) != 1 || got[0] != "eyes" {
				t.Fatalf("reactions = %v, want [eyes]", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvPolicy(t, productionRetries())
			e.gh.LoseAnswerNext("POST", tt.path, 1)
			tt.put(e)
			for i := 0; i < 5 && e.pass() > 0; i++ {
				e.clock.add(time.Minute)
			}
			if e.gh.AnswersLost() != 1 {
				t.Fatalf("the proxy lost %d answers, want 1", e.gh.AnswersLost())
			}
			tt.want(t, e)
			for _, eff := range e.effects() {
				if eff.Status != store.EffectDone {
					t.Errorf("effect %s is %s (%s), want done", eff.Key, eff.Status, eff.LastError)
				}
			}
		})
	}
}

// A sender killed after GitHub applied its comment but before the row was
// marked done (the lease lapses; the next claim is a second attempt) adopts
// the comment instead of posting it again.
func TestCommentPostedBeforeACrashIsAdopted(t *testing.T) {
	e := newEnv(t)
	e.putComment("warn:2", 17, "the deadline passed")
	claimed, err := e.st.ClaimEffects(e.ctx, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	// The killed sender's request reached GitHub.
	clients, _ := app.NewClientCreator(e.gh.AppConfig(), 5*time.Second, app.RetryPolicy{MaxAttempts: 1})
	client, _ := clients.NewInstallationClient(githubtest.InstallationID)
	if _, _, err := client.Issues.CreateComment(e.ctx, "acme", "inference", 17, &github.IssueComment{
		Body: github.String("the deadline passed\n" + Marker(claimed[0].ID))}); err != nil {
		t.Fatal(err)
	}
	e.clock.add(2 * time.Minute) // the lease lapses
	if e.pass() != 1 {
		t.Fatal("the lapsed row was not claimed again")
	}
	if cs := e.gh.Comments(); len(cs) != 1 {
		t.Fatalf("%d comments, want the one posted before the crash", len(cs))
	}
	if eff, _ := e.st.GetEffect(e.ctx, "warn:2"); eff.Status != store.EffectDone {
		t.Errorf("effect %s, want done", eff.Status)
	}
}

// productionRetries is app.DefaultRetryPolicy without its sleeps.
func productionRetries() app.RetryPolicy {
	p := app.DefaultRetryPolicy()
	p.Sleep = func(context.Context, time.Duration) error { return nil }
	return p
}

func (e *env) putComment(key string, number int, text string) {
	e.t.Helper()
	body, _ := json.Marshal(store.CommentBody{Number: number, Body: text})
	if _, err := e.st.PutEffect(e.ctx, store.Effect{Key: key, Kind: store.EffectComment, InstallationID: githubtest.InstallationID, Repo: "acme/inference", Body: body}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) effects() []store.Effect {
	e.t.Helper()
	effs, err := e.st.ListEffects(e.ctx, store.EffectFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return effs
}
