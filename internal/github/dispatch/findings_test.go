package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/kb"
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
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// files adapts artifact.Dir to TraceFiles.
type files struct{ d *artifact.Dir }

func (f files) Open(sum string) (io.ReadCloser, error) { return f.d.Open(sum) }

// regress asks for the quick tier of sha on PR pr and runs its jobs with
// runs, returning the check row.
func (l *lifecycle) regress(pr int, sha string, runs func() []*result.Result) store.CheckRun {
	l.t.Helper()
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: pr,
		HeadSHA: sha, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierQuick, Trigger: "test", Author: "octocat",
		DeliveryID: fmt.Sprintf("d-%d", l.n)}); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	for {
		j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
		if errors.Is(err, store.ErrNoJob) {
			break
		}
		if err != nil {
			l.t.Fatal(err)
		}
		if j.Kind == agentapi.KindProfile {
			l.t.Fatalf("a quick-tier regression queued a profile (profile.on_regression defaults to [merge])")
		}
		l.succeed(j, runs())
	}
	return l.row(sha)
}

// onlyTTFT is a regression of another shape: against the 1.3× faster
// baseline, time to first token is 30% worse while inter-token latency and
// throughput are better.
func onlyTTFT() []*result.Result {
	runs := quickRuns(3)
	for _, r := range runs {
		for k := range r.Metrics {
			if !strings.Contains(k, "ttft") {
				r.Metrics[k] *= 0.5
			}
		}
		r.OutputThroughput *= 2
		r.RequestThroughput *= 2
	}
	return runs
}

// TestKnowledgeBaseMatchesRepeatedRegression: a maintainer records the
// cause of PR #17's regression (no profile); PR #18 regressing the same way
// says it "moved its metrics like #17", a weak, metrics-only match, in its
// check run, PR #19's unrelated
// regression (only the prompt path slower) does not.
func TestKnowledgeBaseMatchesRepeatedRegression(t *testing.T) {
	l := newLifecycle(t)
	l.svc.EnableFindings(FindingsOptions{})
	l.baseline(1.3)
	uniform := func() []*result.Result { return quickRuns(3) }
	const (
		sha17 = "1111111111111111111111111111111111111111"
		sha18 = "2222222222222222222222222222222222222222"
		sha19 = "3333333333333333333333333333333333333333"
	)
	first := l.regress(17, sha17, uniform)
	if doc := l.svc.docOf(first); doc.Report == nil || doc.Report.Verdict != "regression" {
		t.Fatalf("PR #17: verdict %+v, want a regression", doc.Report)
	}
	if _, err := l.svc.RootCause(l.ctx, request.RootCause{Owner: "acme", Repo: "inference", PR: 99, Cause: "x", By: "m"}); !errors.Is(err, request.ErrNoRegression) {
		t.Errorf("root cause on a PR without a regression: %v, want ErrNoRegression", err)
	}
	rec, err := l.svc.RootCause(l.ctx, request.RootCause{Owner: "acme", Repo: "inference", PR: 17, PRURL: "https://github.com/acme/inference/pull/17",
		HeadSHA: sha17, Cause: "fused softmax recomputes the attention", Fix: "#30", By: "maintainer"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID == 0 || rec.Commit != sha17 || !strings.Contains(rec.Phenomenon, "%") || rec.Profile != "" {
		t.Errorf("recorded %+v", rec)
	}

	again := l.regress(18, sha18, uniform)
	notes := strings.Join(l.svc.docOf(again).Notes, "\n")
	if !strings.Contains(notes, "moved its metrics like [#17](https://github.com/acme/inference/pull/17)") || !strings.Contains(notes, "fused softmax recomputes the attention") ||
		!strings.Contains(notes, "weak (metrics only: metric shape 1.00)") {
		t.Errorf("PR #18 regressed as #17 did; its notes do not say so:\n%s", notes)
	}
	if c := l.gh.CheckRuns(); !strings.Contains(c[len(c)-1].Summary, "moved its metrics like") {
		t.Errorf("the check run's summary lacks the match:\n%s", c[len(c)-1].Summary)
	}

	other := l.regress(19, sha19, onlyTTFT)
	if doc := l.svc.docOf(other); doc.Report == nil || doc.Report.Verdict != "regression" {
		t.Fatalf("PR #19: verdict %+v, want a regression", doc.Report)
	} else if n := strings.Join(doc.Notes, "\n"); strings.Contains(n, "🔎") {
		t.Errorf("PR #19's unrelated regression matched the knowledge base:\n%s", n)
	}
}

// trace is a scheduler profile of n steps in which every interrupt-th
// decoding step also takes prefill work.
func trace(n, interrupt int) []byte {
	t := &profile.Trace{Engine: "perfgate-sim", Start: time.Unix(1700000000, 0)}
	at := time.Duration(0)
	for i := range n {
		s := profile.Step{Start: at, Dur: 8 * time.Millisecond, DecodeTokens: 16, DecodeSeqs: 16, Running: 16}
		if i%interrupt == 0 {
			s.PrefillTokens, s.PrefillSeqs, s.Dur = 256, 1, 12*time.Millisecond
		}
		t.Steps = append(t.Steps, s)
		at += s.Dur
	}
	var b bytes.Buffer
	if err := profile.Write(&b, t); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// TestProfilePassPostsWhereTheTimeWent: /perf profile queues one job of
// kind profile naming base and head; once its traces are uploaded and it
// finishes, the diff is posted on the PR with links to both traces, and a
// root cause recorded afterwards carries the profile's fingerprint.
func TestProfilePassPostsWhereTheTimeWent(t *testing.T) {
	l := newLifecycle(t)
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l.svc.EnableFindings(FindingsOptions{Traces: files{dir}, ArtifactURL: func(repo string, id int64, name string) string {
		return fmt.Sprintf("https://perfgate.example/r/%s/artifacts/%d/%s", repo, id, name)
	}})
	l.baseline(1.3)
	l.regress(17, newSHA, func() []*result.Result { return quickRuns(3) })

	req := request.Profile{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17, HeadSHA: newSHA, BaseSHA: headSHA,
		BaseRef: "main", By: "writer", Trigger: "/perf profile"}
	q, err := l.svc.Profile(l.ctx, req)
	if err != nil || q.JobID == 0 || q.Already || q.Requests != 64 {
		t.Fatalf("profile = %+v, %v", q, err)
	}
	if again, err := l.svc.Profile(l.ctx, req); err != nil || !again.Already || again.JobID != q.JobID {
		t.Errorf("a second /perf profile while the first is queued = %+v, %v; want the same job", again, err)
	}
	j := l.claim()
	plan, err := agentapi.ParsePlan(j.Config)
	if err != nil || j.Kind != agentapi.KindProfile || plan.Profile == nil || plan.BaseSHA != headSHA || plan.HeadSHA != newSHA ||
		strings.Join(plan.ProfileSides(), ",") != "base,head" {
		t.Fatalf("profile job %+v plan %+v (%v)", j, plan, err)
	}
	for side, body := range map[string][]byte{"base": trace(400, 5), "head": trace(400, 1)} {
		sum, n, err := dir.Save(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.st.PutArtifact(l.ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: side, SHA: plan.Commit(side),
			Name: "perfgate-sim.trace.json", Size: n, SHA256: sum}); err != nil {
			t.Fatal(err)
		}
	}
	before := len(l.gh.Comments())
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	l.judge()
	cs := l.gh.Comments()
	if len(cs) != before+1 {
		t.Fatalf("%d comments after the profile, want %d", len(cs), before+1)
	}
	body := cs[len(cs)-1].Body
	for _, want := range []string{"Where the time went", "Prefill interruptions of decode went up by", "[base perfgate-sim.trace.json](https://perfgate.example/r/acme/inference/artifacts/", "[head perfgate-sim.trace.json]"} {
		if !strings.Contains(body, want) {
			t.Errorf("profile comment lacks %q:\n%s", want, body)
		}
	}
	rec, err := l.svc.RootCause(l.ctx, request.RootCause{Owner: "acme", Repo: "inference", PR: 17, HeadSHA: newSHA, Cause: "prefill eagerness turned up", By: "m"})
	if err != nil || !strings.Contains(rec.Profile, "prefill interruptions of decode went up") {
		t.Fatalf("root cause after the profile = %+v, %v; want the profile's finding", rec, err)
	}
	rows, err := l.st.ListRootCauses(l.ctx, testRepo)
	if err != nil || len(rows) != 1 || !bytes.Contains(rows[0].Signature, []byte(`"profile"`)) {
		t.Errorf("stored record %+v (%v): want the profile fingerprint in its signature", rows, err)
	}
	// A pass that failed says so on the PR.
	q2, err := l.svc.Profile(l.ctx, req)
	if err != nil || q2.Already {
		t.Fatalf("a new /perf profile after the first finished = %+v, %v; want a new job", q2, err)
	}
	l.failJob(l.claim(), "engine crashed during warm-up")
	if cs := l.gh.Comments(); !strings.Contains(cs[len(cs)-1].Body, "could not profile") || !strings.Contains(cs[len(cs)-1].Body, "engine crashed during warm-up") {
		t.Errorf("failed pass comment: %s", cs[len(cs)-1].Body)
	}
	// One cancelled (a new push, the PR closed) is not worth a comment.
	q3, err := l.svc.Profile(l.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	n := len(l.gh.Comments())
	if err := l.svc.Close(l.ctx, testRepo, 17, "octocat"); err != nil {
		t.Fatal(err)
	}
	l.judge()
	if j, err := l.st.GetJob(l.ctx, q3.JobID); err != nil || j.Status != jobstate.Cancelled {
		t.Fatalf("the closed PR's profile job: %+v %v, want cancelled", j.Status, err)
	}
	for _, c := range l.gh.Comments()[n:] {
		if strings.Contains(c.Body, "profile") {
			t.Errorf("a cancelled pass commented: %s", c.Body)
		}
	}
}

// A regression on a tier profile.on_regression lists queues one profiling
// pass of the PR's base and head, says so in the check run, and a retest
// that regresses again does not queue another but names the one queued.
func TestRegressionQueuesProfile(t *testing.T) {
	l := newLifecycle(t)
	l.gh.SetContent(testRepo, "main", config.DefaultPath, []byte("profile:\n  on_regression: [quick]\n  requests: 32\n"))
	l.svc.EnableFindings(FindingsOptions{})
	l.baseline(1.3)
	profiles := func() []store.Job {
		jobs, err := l.st.ListJobs(l.ctx, store.JobFilter{Repo: testRepo, Tier: agentapi.KindProfile})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	for i, confirm := range []bool{false, true} {
		l.request(newSHA, confirm)
		for {
			j, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, Lease: time.Minute})
			if errors.Is(err, store.ErrNoJob) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Kind == agentapi.KindProfile {
				continue // left running: the retest must not queue a second
			}
			l.succeed(j, quickRuns(3))
		}
		doc := l.doc(newSHA)
		if doc.Report == nil || doc.Report.Verdict != "regression" {
			t.Fatalf("judgement %d: %+v, want a regression", i, doc.Report)
		}
		// The first verdict's step queued the pass (its ID is not known
		// when the check's text is written); the retest names it.
		if i == 0 && !strings.Contains(strings.Join(doc.Notes, "\n"), fmt.Sprintf("Profiling base `%s` and head `%s` (a pass queued with this verdict)", rev.Short(headSHA), rev.Short(newSHA))) {
			t.Errorf("the first regression's check run does not say a profile was queued:\n%s", strings.Join(doc.Notes, "\n"))
		}
	}
	jobs := profiles()
	if len(jobs) != 1 {
		t.Fatalf("%d profiling passes after a regression and its retest, want 1", len(jobs))
	}
	plan, err := agentapi.ParsePlan(jobs[0].Config)
	if err != nil || plan.Profile == nil || plan.Profile.Requests != 32 || plan.BaseSHA != headSHA || plan.HeadSHA != newSHA || jobs[0].PRNumber != 17 {
		t.Errorf("profile job %+v plan %+v (%v)", jobs[0], plan, err)
	}
	if notes := strings.Join(l.doc(newSHA).Notes, "\n"); !strings.Contains(notes, fmt.Sprintf("Profiling base `%s` and head `%s` (job %d)", rev.Short(headSHA), rev.Short(newSHA), jobs[0].ID)) {
		t.Errorf("the check run does not say a profile was queued:\n%s", notes)
	}
}

func TestPhenomenonOf(t *testing.T) {
	up, down := config.HigherIsWorse, config.LowerIsWorse
	cases := []struct {
		metrics []kb.MetricChange
		want    string
	}{
		{[]kb.MetricChange{{Metric: "ttft_median", Change: -0.37, Direction: up, Moved: true}, {Metric: "tpot_p90", Change: 0.18, Direction: up, Moved: true},
			{Metric: "tpot_median", Change: 0.21, Direction: up, Moved: true}, {Metric: "itl_median", Change: 0.5, Direction: up}},
			"tpot_median +21%, tpot_p90 +18%; better: ttft_median −37%"},
		{[]kb.MetricChange{{Metric: "output_throughput", Change: -0.2, Direction: down, Moved: true}, {Metric: "ttft_p90", Change: 0.1, Direction: up, Moved: true}},
			"output_throughput −20%, ttft_p90 +10%"},
	}
	for _, tc := range cases {
		if got := phenomenonOf(kb.Signature{Metrics: tc.metrics}); got != tc.want {
			t.Errorf("phenomenonOf = %q, want %q", got, tc.want)
		}
	}
}
