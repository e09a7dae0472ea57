package dispatch

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// TestHandleKind: a finished job of a registered kind goes to its handler,
// is tried again when the handler fails, and counts as judged once it
// succeeds; it never touches a check run.
func TestHandleKind(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	gh := ghtest.New(t)
	svc, st := newService(t, gh, "sqlite://"+filepath.Join(t.TempDir(), "db.sqlite"), clock)
	var got []int64
	fail := true
	svc.HandleKind("probe", func(ctx context.Context, job store.Job) error {
		got = append(got, job.ID)
		if fail {
			fail = false
			return errors.New("store hiccup")
		}
		return nil
	})
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Kind: "probe", Repo: testRepo, HeadSHA: headSHA, Config: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner", Labels: []string{"gpu"}, TokenHash: store.HashToken("t")})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: ag.Labels, Lease: time.Minute})
	if err != nil || claimed.ID != job.ID {
		t.Fatalf("claim: %v %v", claimed.ID, err)
	}
	if _, err := st.Finish(ctx, job.ID, claimed.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := svc.JudgePass(ctx); err != nil {
			t.Fatal(err)
		}
		clock.add(time.Second)
	}
	if len(got) != 2 || got[0] != job.ID || got[1] != job.ID {
		t.Errorf("handler calls %v: want job %d twice (a failure, then the retry)", got, job.ID)
	}
	if rows, err := st.ListCheckRuns(ctx, testRepo, 0); err != nil || len(rows) != 0 {
		t.Errorf("a probe job made check runs: %+v (%v)", rows, err)
	}
}
