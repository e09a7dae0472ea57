package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
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
	if _, err := e.st.Finish(e.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutArtifact(e.ctx, up); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("finished job: %v, want ErrLeaseLost", err)
	}
}

// The retention sweep's half in the store: rows older than the cutoff go
// (and are returned, to log), newer ones stay, and the files the remaining
// rows reference are listed — a file shared with a newer row among them.
func testArtifactRetention(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{Kind: "profile"})
	old := e.claim(t, nil, nil, time.Hour)
	put := func(j store.Job, name, sum string) store.Artifact {
		t.Helper()
		a, err := e.st.PutArtifact(e.ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: "head", Name: name, Size: 5, SHA256: sum})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	oldShared := put(old, "shared.json", "s1")
	oldOnly := put(old, "only.json", "o1")
	cutoff := e.clock.Now().Add(time.Minute)
	e.clock.Advance(2 * time.Minute)
	e.enqueue(t, store.JobSpec{Kind: "profile"})
	fresh := e.claim(t, nil, nil, time.Hour)
	newShared := put(fresh, "shared.json", "s1")

	gone, err := e.st.DeleteArtifactsBefore(e.ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	for _, a := range gone {
		ids[a.ID] = true
	}
	if len(gone) != 2 || !ids[oldShared.ID] || !ids[oldOnly.ID] || gone[0].Size != 5 {
		t.Fatalf("deleted %+v, want rows %d and %d", gone, oldShared.ID, oldOnly.ID)
	}
	for _, id := range []int64{oldShared.ID, oldOnly.ID} {
		if _, err := e.st.GetArtifact(e.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("swept artifact %d: %v, want ErrNotFound", id, err)
		}
	}
	if got, err := e.st.GetArtifact(e.ctx, newShared.ID); err != nil || got.SHA256 != "s1" {
		t.Errorf("newer artifact %d: %+v, %v", newShared.ID, got, err)
	}
	sums, err := e.st.ArtifactSHA256s(e.ctx)
	if err != nil || len(sums) != 1 || !sums["s1"] {
		t.Errorf("referenced files = %v, %v; want only s1", sums, err)
	}
	if again, err := e.st.DeleteArtifactsBefore(e.ctx, cutoff); err != nil || len(again) != 0 {
		t.Errorf("second sweep = %+v, %v; want nothing", again, err)
	}
}
