package agent_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// TestProfilePass: a profiling job starts the engine of base and then of
// head with its profiler on, records the load between /start_profile and
// /stop_profile, and uploads each side's scheduler trace; a trace over
// profile.max_bytes fails the job naming the cap.
func TestProfilePass(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	p := plan(agentapi.SimEngine{DecodeStep: agentapi.Duration(2 * time.Millisecond)}, 30, 1, 5, 0)
	p.BaseSHA = "def456"
	p.Profile = &agentapi.ProfilePlan{Requests: 30, Timeout: agentapi.Duration(time.Minute)}
	ok := e.enqueue(p, "profile", 7)
	p.Profile = &agentapi.ProfilePlan{Requests: 30, Timeout: agentapi.Duration(time.Minute), MaxBytes: 100}
	capped := e.enqueue(p, "profile", 8)
	// profile.command instead of the engine's endpoints: what it leaves in
	// {{.Out}} is uploaded.
	p.Profile = &agentapi.ProfilePlan{Requests: 10, Timeout: agentapi.Duration(time.Minute),
		Command: []string{"sh", "-c", "printf 'port=%s sha=%s' {{.Port}} {{.SHA}} > {{.Out}}/report.nsys-rep"}}
	command := e.enqueue(p, "profile", 9)
	e.runAgent("a", "GPU-11111111-2222-3333-4444-555555555555")
	waitFor(t, "both profiling jobs", 60*time.Second, func() bool {
		done := func(s jobstate.Status) bool { return s != jobstate.Queued && s != jobstate.Running }
		return done(e.job(ok.ID).Status) && done(e.job(capped.ID).Status) && done(e.job(command.ID).Status)
	})
	if j := e.job(ok.ID); j.Status != jobstate.Succeeded {
		t.Fatalf("profiling job: %s (%s)", j.Status, j.FailureReason)
	}
	if n := len(e.results(ok.ID)); n != 0 {
		t.Errorf("a profiling pass stored %d measured results, want none", n)
	}
	arts, err := e.st.ListArtifacts(context.Background(), ok.ID)
	if err != nil {
		t.Fatal(err)
	}
	sides := map[string]bool{}
	for _, a := range arts {
		sides[a.Side] = true
		f, err := e.arts.Open(a.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := profile.Parse(f)
		f.Close()
		if err != nil || len(tr.Steps) < 10 || tr.Engine != "perfgate-sim" {
			t.Errorf("%s trace %s: %v, %d steps", a.Side, a.Name, err, len(tr.Steps))
		}
		if want := map[string]string{"base": "def456", "head": "abc123"}[a.Side]; a.SHA != want {
			t.Errorf("%s trace of commit %q, want %q", a.Side, a.SHA, want)
		}
	}
	if len(arts) != 2 || !sides["base"] || !sides["head"] {
		t.Errorf("artifacts %+v: want one trace of base and one of head", arts)
	}
	if j := e.job(command.ID); j.Status != jobstate.Succeeded {
		t.Errorf("profile.command job: %s (%s)", j.Status, j.FailureReason)
	} else if arts, err := e.st.ListArtifacts(context.Background(), command.ID); err != nil || len(arts) != 2 || arts[0].Name != "report.nsys-rep" {
		t.Errorf("profile.command artifacts %+v (%v): want report.nsys-rep of base and head", arts, err)
	} else if f, err := e.arts.Open(arts[1].SHA256); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(f)
		f.Close()
		if !strings.HasPrefix(string(b), "port=") || strings.HasPrefix(string(b), "port=0 ") || !strings.HasSuffix(string(b), "sha=abc123") {
			t.Errorf("head's report %q: want the engine's port and the head commit filled in", b)
		}
	}
	if j := e.job(capped.ID); j.Status != jobstate.Failed || !strings.Contains(j.FailureReason, "over profile.max_bytes (100)") {
		t.Errorf("capped job: %s (%s), want failed naming the cap", j.Status, j.FailureReason)
	}
}
