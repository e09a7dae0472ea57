package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

func testArtifacts(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{Kind: "profile"})
	j := e.claim(t, nil, nil, time.Minute)
	up := store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: "head", SHA: "abc123", Name: "trace.json", Size: 10, SHA256: "aa"}
	a, err := e.st.PutArtifact(e.ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.Attempt != 1 || a.Repo != "acme/llm" || a.Side != "head" || a.Size != 10 || a.CreatedAt.IsZero() {
		t.Fatalf("stored %+v", a)
	}
	// The same file again under the lease (a retried upload) replaces it.
	up.Size, up.SHA256 = 12, "bb"
	again, err := e.st.PutArtifact(e.ctx, up)
	if err != nil || again.ID != a.ID || again.Size != 12 || again.SHA256 != "bb" {
		t.Fatalf("retry = %+v, %v; want row %d replaced", again, err, a.ID)
	}
	base := up
	base.Side, base.Name = "base", "trace.json"
	if _, err := e.st.PutArtifact(e.ctx, base); err != nil {
		t.Fatal(err)
	}
	list, err := e.st.ListArtifacts(e.ctx, j.ID)
	if err != nil || len(list) != 2 || list[0].Side != "head" || list[1].Side != "base" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	got, err := e.st.GetArtifact(e.ctx, a.ID)
	if err != nil || got.SHA256 != "bb" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := e.st.GetArtifact(e.ctx, 9999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing artifact: %v, want ErrNotFound", err)
	}
	// Fenced: a stale lease, a finished job.
	stale := up
	stale.LeaseID = "not-the-lease"
	if _, err := e.st.PutArtifact(e.ctx, stale); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("stale lease: %v, want ErrLeaseLost", err)
	}
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, store.StatusSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutArtifact(e.ctx, up); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("finished job: %v, want ErrLeaseLost", err)
	}
}
