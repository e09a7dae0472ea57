package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// TestCapacityAndSoakJobs: a capacity job sweeps base and head in ABBA
// order, each on a fresh engine, and uploads one sweep per run with its
// knee; a soak job keeps load on the head and uploads its samples and
// verdict. Neither stores measured results, and both succeed without.
func TestCapacityAndSoakJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps and soaks an engine for about half a minute")
	}
	t.Parallel()
	e := newEnv(t, time.Minute)
	p := plan(agentapi.SimEngine{DecodeStep: agentapi.Duration(2 * time.Millisecond)}, 10, 1, 2, 0)
	p.BaseSHA = "def456"
	p.Capacity = &agentapi.CapacityPlan{
		Sweep: capacity.Plan{Rates: []float64{4, 8}}, SLO: capacity.SLO{TTFTms: 1000},
		StepSeconds: 1, MinPrompts: 8, Sweeps: 2,
	}
	capJob := e.enqueue(p, agentapi.KindCapacity, 7)
	p.Capacity = nil
	th := soak.DefaultThresholds()
	th.MinSamples = 2
	p.Soak = &agentapi.SoakPlan{Duration: agentapi.Duration(2 * time.Second), Window: agentapi.Duration(500 * time.Millisecond), Rate: 16, Thresholds: th}
	soakJob := e.enqueue(p, agentapi.KindSoak, 8)
	e.runAgent("a", "GPU-11111111-2222-3333-4444-555555555555")
	waitFor(t, "the capacity and soak jobs", 90*time.Second, func() bool {
		done := func(s jobstate.Status) bool { return s != jobstate.Queued && s != jobstate.Running }
		return done(e.job(capJob.ID).Status) && done(e.job(soakJob.ID).Status)
	})
	for _, id := range []int64{capJob.ID, soakJob.ID} {
		if j := e.job(id); j.Status != jobstate.Succeeded {
			t.Fatalf("job %d: %s (%s)", id, j.Status, j.FailureReason)
		}
		if n := len(e.results(id)); n != 0 {
			t.Errorf("job %d stored %d measured results, want none", id, n)
		}
	}

	arts, err := e.st.ListArtifacts(context.Background(), capJob.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order string
	for _, a := range arts {
		var sw agentapi.CapacitySweep
		e.readJSON(a.SHA256, &sw)
		order += a.Side[:1]
		if sw.Side != a.Side || sw.Sweep == nil || len(sw.Sweep.Steps) < 2 || sw.Knee.Rate <= 0 {
			t.Errorf("%s: %+v: want the side's sweep with at least two steps and a knee", a.Name, sw)
		}
		if want := map[string]string{"base": "def456", "head": "abc123"}[a.Side]; sw.SHA != want {
			t.Errorf("%s swept commit %q, want %q", a.Name, sw.SHA, want)
		}
	}
	if order != "bhhb" {
		t.Errorf("sweeps ran %q, want bhhb (ABBA)", order)
	}

	arts, err = e.st.ListArtifacts(context.Background(), soakJob.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 1 || arts[0].Name != agentapi.SoakArtifact {
		t.Fatalf("soak artifacts %+v: want soak.json", arts)
	}
	var run agentapi.SoakRun
	e.readJSON(arts[0].SHA256, &run)
	if len(run.Samples) < 3 || run.SHA != "abc123" || len(run.Report.Trends) == 0 {
		t.Errorf("soak run: %d samples of %q, %d trends", len(run.Samples), run.SHA, len(run.Report.Trends))
	}
	for _, s := range run.Samples[1:] {
		if !(s.RSSBytes > 0) || s.Requests == 0 {
			t.Errorf("soak sample %+v: want the engine's RSS and the window's requests", s)
		}
	}
}

// TestCapacityInterleavedBySteps: with capacity.interleave: steps both
// engines stay up and the two sweeps advance rate by rate, each measuring
// its own commit; the artifacts come out per repeat, base and head.
func TestCapacityInterleavedBySteps(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps two engines for about ten seconds")
	}
	t.Parallel()
	e := newEnv(t, time.Minute)
	p := plan(agentapi.SimEngine{DecodeStep: agentapi.Duration(2 * time.Millisecond)}, 10, 1, 2, 0)
	p.BaseSHA = "def456"
	p.Capacity = &agentapi.CapacityPlan{
		Sweep: capacity.Plan{Rates: []float64{4, 8}}, SLO: capacity.SLO{TTFTms: 1000},
		StepSeconds: 1, MinPrompts: 8, Sweeps: 1, Steps: true,
	}
	job := e.enqueue(p, agentapi.KindCapacity, 7)
	e.runAgent("a", "GPU-11111111-2222-3333-4444-555555555555")
	waitFor(t, "the capacity job", 60*time.Second, func() bool { return finished(e.job(job.ID)) })
	if j := e.job(job.ID); j.Status != jobstate.Succeeded {
		t.Fatalf("job: %s (%s)\n%s", j.Status, j.FailureReason, e.log(job.ID))
	}
	arts, err := e.st.ListArtifacts(context.Background(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order string
	for _, a := range arts {
		var sw agentapi.CapacitySweep
		e.readJSON(a.SHA256, &sw)
		order += a.Side[:1]
		if want := map[string]string{"base": "def456", "head": "abc123"}[a.Side]; sw.SHA != want || sw.Sweep == nil || len(sw.Sweep.Steps) < 2 {
			t.Errorf("%s: %+v: want the sweep of %s with at least two steps", a.Name, sw, want)
		}
	}
	if order != "bh" {
		t.Errorf("artifacts %q, want bh", order)
	}
	if log := e.log(job.ID); !strings.Contains(log, `"side":"base"`) || !strings.Contains(log, `"side":"head"`) {
		t.Errorf("the job log names no steps of both sides:\n%s", log)
	}
}

func (e *env) readJSON(sum string, v any) {
	e.t.Helper()
	f, err := e.arts.Open(sum)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(v); err != nil {
		e.t.Fatal(err)
	}
}
