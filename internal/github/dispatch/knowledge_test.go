package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// scaledTrace is trace(n, interrupt) with every step slowed by factor: a
// uniform slowdown leaves the share of interrupted decoding steps as it was.
func scaledTrace(n, interrupt int, factor float64) []byte {
	tr, err := profile.Parse(bytes.NewReader(trace(n, interrupt)))
	if err != nil {
		panic(err)
	}
	at := time.Duration(0)
	for i := range tr.Steps {
		tr.Steps[i].Start = at
		tr.Steps[i].Dur = time.Duration(float64(tr.Steps[i].Dur) * factor)
		at += tr.Steps[i].Dur
	}
	var b bytes.Buffer
	if err := profile.Write(&b, tr); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// regressProfiled runs PR pr at sha to a regression on the quick tier
// (profile.on_regression: [quick]), returns the check's notes as they were
// while its profile was queued, then runs the profile with head's trace and
// returns the comment it posted.
func (l *lifecycle) regressProfiled(dir *artifact.Dir, pr int, sha string, head []byte) (notes, comment string) {
	l.t.Helper()
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: pr,
		HeadSHA: sha, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierQuick, Trigger: "test", Author: "octocat",
		DeliveryID: fmt.Sprintf("kb-%d", l.n)}); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	var prof *store.Job
	for {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			break
		}
		if err != nil {
			l.t.Fatal(err)
		}
		if j.Kind == agentapi.KindProfile {
			prof = &j
			continue
		}
		l.succeed(j, quickRuns(3))
	}
	notes = strings.Join(l.doc(sha).Notes, "\n")
	if prof == nil {
		l.t.Fatalf("PR #%d: no profile queued on its regression; notes:\n%s", pr, notes)
	}
	plan, err := agentapi.ParsePlan(prof.Config)
	if err != nil {
		l.t.Fatal(err)
	}
	for side, body := range map[string][]byte{"base": trace(400, 5), "head": head} {
		sum, n, err := dir.Save(bytes.NewReader(body))
		if err != nil {
			l.t.Fatal(err)
		}
		if _, err := l.st.PutArtifact(l.ctx, store.ArtifactUpload{JobID: prof.ID, LeaseID: prof.LeaseID, Side: side, SHA: plan.Commit(side),
			Name: "perfgate-sim.trace.json", Size: n, SHA256: sum}); err != nil {
			l.t.Fatal(err)
		}
	}
	if _, err := l.st.Finish(l.ctx, prof.ID, prof.LeaseID, jobstate.Succeeded, ""); err != nil {
		l.t.Fatal(err)
	}
	l.judge()
	cs := l.gh.Comments()
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Number == pr && strings.Contains(cs[i].Body, "perfgate profile") {
			return notes, cs[i].Body
		}
	}
	l.t.Fatalf("PR #%d: no profile comment", pr)
	return "", ""
}

// TestKnowledgeBaseWaitsForTheProfile replays the false match: a
// cause recorded with its profile (#17: prefill interrupts every decoding
// step), then a uniform slowdown (#18) whose gated metrics move exactly as
// #17's did. While #18's profile is queued its check names #17 only as
// what the profile will decide; once the profile shows the interruptions
// unchanged, the knowledge base says it is not that cause. #19, the same
// scheduler change again, is named a strong match once profiled.
func TestKnowledgeBaseWaitsForTheProfile(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("profile:\n  on_regression: [quick]\n  requests: 32\n"))
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l.svc.EnableFindings(FindingsOptions{Traces: files{dir}})
	l.baseline(1.3)
	const (
		sha17 = "1111111111111111111111111111111111111111"
		sha18 = "2222222222222222222222222222222222222222"
		sha19 = "3333333333333333333333333333333333333333"
	)
	notes, _ := l.regressProfiled(dir, 17, sha17, trace(400, 1))
	if strings.Contains(notes, "🔎") {
		t.Errorf("PR #17 with an empty knowledge base: %s", notes)
	}
	rec, err := l.svc.RootCause(l.ctx, request.RootCause{Owner: "acme", Repo: "inference", PR: 17, PRURL: "https://github.com/acme/inference/pull/17",
		HeadSHA: sha17, Cause: "scheduler eagerness turned up", By: "maintainer"})
	if err != nil || rec.Profile == "" {
		t.Fatalf("root cause = %+v, %v; want it recorded with the profile", rec, err)
	}

	notes, comment := l.regressProfiled(dir, 18, sha18, scaledTrace(400, 5, 1.25))
	if strings.Contains(notes, "looks like") || !strings.Contains(notes, "compares the profiles when this one finishes") || !strings.Contains(notes, "#17") {
		t.Errorf("PR #18 (uniform slowdown), profile queued: the check should wait for the profile, not name #17:\n%s", notes)
	}
	if strings.Contains(comment, "looks like") || !strings.Contains(comment, "not that cause") || !strings.Contains(comment, "profile similarity") {
		t.Errorf("PR #18's profile comment should rule #17 out:\n%s", comment)
	}

	notes, comment = l.regressProfiled(dir, 19, sha19, trace(400, 1))
	if strings.Contains(notes, "looks like") {
		t.Errorf("PR #19, profile queued: named a match before its profile:\n%s", notes)
	}
	if !strings.Contains(comment, "looks like [#17](https://github.com/acme/inference/pull/17)") || !strings.Contains(comment, "strong (profile and metrics") ||
		!strings.Contains(comment, "prefill_interruption_rate ↑") {
		t.Errorf("PR #19's profile comment should name #17, strongly, with what agreed:\n%s", comment)
	}
}

// TestKnowledgeBaseUsesAFinishedProfile: a regression judged after its
// commit's profile finished (a /perf profile before a retest) is matched
// on the profile at once.
func TestKnowledgeBaseUsesAFinishedProfile(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("profile:\n  on_regression: [quick]\n  requests: 32\n"))
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l.svc.EnableFindings(FindingsOptions{Traces: files{dir}})
	l.baseline(1.3)
	const sha17, sha18 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	l.regressProfiled(dir, 17, sha17, trace(400, 1))
	if _, err := l.svc.RootCause(l.ctx, request.RootCause{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: sha17, Cause: "scheduler eagerness turned up", By: "m"}); err != nil {
		t.Fatal(err)
	}
	l.regressProfiled(dir, 18, sha18, trace(400, 1))
	// A retest of #18: its profile is in.
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 18,
		HeadSHA: sha18, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierQuick, Trigger: "/perf retest", Author: "octocat",
		DeliveryID: fmt.Sprintf("kb-%d", l.n)}); err != nil {
		t.Fatal(err)
	}
	l.flush()
	runs := func() []*result.Result { return quickRuns(3) }
	for {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		l.succeed(j, runs())
	}
	if notes := strings.Join(l.doc(sha18).Notes, "\n"); !strings.Contains(notes, "looks like #17") || !strings.Contains(notes, "profile similarity") {
		t.Errorf("retest of #18 with its profile in: notes do not name #17 on the profile:\n%s", notes)
	}
}
