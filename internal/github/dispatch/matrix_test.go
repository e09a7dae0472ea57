package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

func TestMatrixPlans(t *testing.T) {
	cfg := config.Default()
	tier, err := cfg.Tier("nightly")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := agentapi.PlanFromConfig(cfg, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	plans, labels := matrixPlans(plan, tier)
	if len(plans) != len(tier.Matrix) || len(tier.Matrix) < 2 {
		t.Fatalf("%d plans for %d matrix cells", len(plans), len(tier.Matrix))
	}
	seen := map[string]bool{}
	for i, p := range plans {
		if seen[labels[i]] {
			t.Errorf("label %q twice", labels[i])
		}
		seen[labels[i]] = true
		if m := tier.Matrix[i]; m.MaxConcurrency != 0 && p.Workload.MaxConcurrency != m.MaxConcurrency {
			t.Errorf("cell %s: concurrency %d, want %d", labels[i], p.Workload.MaxConcurrency, m.MaxConcurrency)
		}
	}
	quick, _ := cfg.Tier("quick")
	if ps, ls := matrixPlans(plan, quick); len(ps) != 1 || ls[0] != "" {
		t.Errorf("a tier without a matrix should give one unlabelled plan, got %v", ls)
	}
}

// Each nightly cell is judged against its own baseline; a cell without one
// gets its first; the check shows every cell and takes the worst verdict.
func TestNightlyMatrixJudgedPerCell(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
	clock := &testClock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	svc, st := newService(t, gh, filepath.Join(t.TempDir(), "db"), clock)
	defer st.Close()
	ag, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	tier, _ := cfg.Tier("nightly")
	// Cell c=1 already has a baseline 20% faster than tonight: a regression.
	base := verifiedRuns(5)
	for _, r := range base {
		for k := range r.Metrics {
			r.Metrics[k] /= 1.2
		}
		r.OutputThroughput *= 1.2
	}
	if _, _, err := baseline.Promote(ctx, st, base, baseline.Meta{Repo: testRepo, Key: "nightly/c=1", Version: "v1", Commit: headSHA, By: "t"}, tier); err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestRun(ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference",
		HeadSHA: headSHA, BaseSHA: headSHA, BaseRef: "main", Tier: check.TierNightly, Trigger: "nightly", DeliveryID: "nightly-1"}); err != nil {
		t.Fatal(err)
	}
	row, err := st.GetCheckRun(ctx, testRepo, headSHA, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	ids := row.JobIDs
	if len(ids) != len(tier.Matrix) {
		t.Fatalf("%d jobs for %d matrix cells", len(ids), len(tier.Matrix))
	}
	for range ids {
		c, err := st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: ag.Labels, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range verifiedRuns(5) {
			upload(t, st, c, i, r)
		}
		if _, err := st.Finish(ctx, c.ID, c.LeaseID, jobstate.Succeeded, ""); err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := svc.JudgePass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	flush(t, sender(svc, st, clock))
	crs := gh.CheckRuns()
	if len(crs) != 1 {
		t.Fatalf("%d check runs, want the one nightly", len(crs))
	}
	cr := crs[0]
	if cr.Conclusion != "neutral" {
		t.Errorf("nightly with a regressed cell: conclusion %q, want neutral (warning)\n%s", cr.Conclusion, cr.Summary)
	}
	if !strings.Contains(cr.Summary, "c=1 · TPOT p99") {
		t.Errorf("summary lacks the c=1 cell's rows:\n%s", cr.Summary)
	}
	if _, err := st.LatestBaseline(ctx, testRepo, "nightly/c=16"); err != nil {
		t.Errorf("cell c=16 had no baseline; its first nightly should become one: %v", err)
	}
	if pts, err := st.ListTrend(ctx, testRepo, "nightly/c=16", "tpot_p99", time.Time{}); err != nil || len(pts) != 1 {
		t.Errorf("trend of c=16 tpot_p99: %v %v, want one point", pts, err)
	}
}

func upload(t *testing.T, st store.Store, job store.Job, i int, r *result.Result) {
	t.Helper()
	full, _ := json.Marshal(r)
	if _, _, err := st.PutResult(context.Background(), store.ResultUpload{JobID: job.ID, LeaseID: job.LeaseID, IdempotencyKey: fmt.Sprintf("m%d", i),
		RunIndex: i, Kind: jobstate.KindMeasured, Summary: full, Samples: full}); err != nil {
		t.Fatal(err)
	}
}
