package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// The capacity judge reads every sweep a job uploaded, compares the
// knees per side and draws the first sweep of each; the soak judge reads
// soak.json. The sweeps and samples are the ones measured against the
// sim (internal/analysis/capacity and internal/analysis/soak testdata).
func TestJudgeLongRun(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 0)
	if err != nil {
		t.Fatal(err)
	}
	upload := func(j store.Job, side, name string, v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		sum, n, err := dir.Save(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutArtifact(ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: side, Name: name, Size: n, SHA256: sum}); err != nil {
			t.Fatal(err)
		}
	}
	queue := func(p agentapi.Plan, kind string) store.Job {
		t.Helper()
		cfg, _ := json.Marshal(p)
		if _, err := st.Enqueue(ctx, store.JobSpec{Tier: kind, Kind: kind, Repo: "o/r", HeadSHA: p.HeadSHA, BaseSHA: p.BaseSHA, PRNumber: 31, Config: cfg, Labels: []string{"gpu"}}); err != nil {
			t.Fatal(err)
		}
		j, err := st.Claim(ctx, store.ClaimRequest{Labels: []string{"gpu"}, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	var base, head capacity.Sweep
	readFixture(t, "../../analysis/capacity/testdata/base.json", &base)
	readFixture(t, "../../analysis/capacity/testdata/head.json", &head)
	j := queue(agentapi.Plan{HeadSHA: "h", BaseSHA: "b", Capacity: &agentapi.CapacityPlan{Threshold: 0.1}}, agentapi.KindCapacity)
	for i, sw := range []struct {
		side string
		s    *capacity.Sweep
	}{{agentapi.SideBase, &base}, {agentapi.SideHead, &head}, {agentapi.SideHead, &head}, {agentapi.SideBase, &base}} {
		upload(j, sw.side, agentapi.CapacityArtifactPrefix+string(rune('1'+i))+".json", agentapi.CapacitySweep{Side: sw.side, Sweep: sw.s, Knee: sw.s.Knee()})
	}
	v, err := JudgeCapacity(ctx, st, files{dir}, j)
	if err != nil {
		t.Fatal(err)
	}
	if v.Comparison.Verdict != capacity.Regression || v.Comparison.Base.N != 2 || v.Comparison.Head.N != 2 {
		t.Errorf("comparison %+v: want a regression over two sweeps a side", v.Comparison)
	}
	if v.Report == nil || v.Report.Verdict != gate.Regression || v.Report.Rule != gate.RuleCapacity || v.Report.Metrics[0].BaselineRuns != 2 {
		t.Errorf("verdict document %+v: want a capacity regression over two sweeps a side", v.Report)
	}
	if strings.Count(v.Markdown, "◆") != 3 || strings.Count(v.SVG, `class="knee"`) != 2 {
		t.Errorf("rendering lacks the knees:\n%s", v.Markdown)
	}

	var samples []soak.Sample
	readFixture(t, "../../analysis/soak/testdata/leak.json", &samples)
	sj := queue(agentapi.Plan{HeadSHA: "h2"}, agentapi.KindSoak)
	if _, err := JudgeSoak(ctx, st, files{dir}, sj); err == nil {
		t.Error("a soak without soak.json judged")
	}
	upload(sj, agentapi.SideHead, agentapi.SoakArtifact, agentapi.SoakRun{SHA: "h2", Samples: samples, Report: soak.Judge(samples, soak.DefaultThresholds())})
	run, err := JudgeSoak(ctx, st, files{dir}, sj)
	if err != nil {
		t.Fatal(err)
	}
	if run.Report.Pass || len(run.Samples) != len(samples) {
		t.Errorf("soak run: pass %v, %d samples; want the leak failed, %d samples", run.Report.Pass, len(run.Samples), len(samples))
	}
}

func readFixture(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
