package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

func testRootCauses(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	sig := json.RawMessage(`{"metrics":[{"metric":"tpot_p99","change":0.18,"worse":true}],"profile":{"keys":["a"],"values":[1.2]}}`)
	in := store.RootCause{Repo: "acme/llm", Number: 123, URL: "https://github.com/acme/llm/pull/123",
		Commit: "1111111111111111111111111111111111111111", CulpritPR: 57, Summary: "prefill interrupts decode",
		Cause: "scheduler priority change", FixURL: "https://github.com/acme/llm/pull/130", Signature: sig, RecordedBy: "maintainer"}
	r, err := e.st.PutRootCause(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == 0 || r.Number != 123 || r.CulpritPR != 57 || r.Cause != in.Cause || r.CreatedAt.IsZero() || !r.CreatedAt.Equal(r.UpdatedAt) {
		t.Fatalf("stored = %+v", r)
	}
	assertJSON(t, "signature", r.Signature, string(sig))

	e.clock.Advance(time.Minute)
	r.FixURL = "https://github.com/acme/llm/pull/131"
	up, err := e.st.PutRootCause(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != r.ID || up.FixURL != r.FixURL || !up.UpdatedAt.After(up.CreatedAt) {
		t.Fatalf("updated = %+v", up)
	}
	other := in
	other.Repo, other.Signature = "zeta/other", nil
	if _, err := e.st.PutRootCause(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	second := in
	second.Cause = "a second finding"
	if _, err := e.st.PutRootCause(e.ctx, second); err != nil {
		t.Fatal(err)
	}
	list, err := e.st.ListRootCauses(e.ctx, "acme/llm")
	if err != nil || len(list) != 2 || list[0].Cause != "a second finding" || list[1].ID != r.ID {
		t.Fatalf("list = %+v, %v; want the repository's two, newest first", list, err)
	}
	if all, err := e.st.ListRootCauses(e.ctx, ""); err != nil || len(all) != 3 {
		t.Errorf("all = %d, %v; want 3", len(all), err)
	}
	got, err := e.st.GetRootCause(e.ctx, r.ID)
	if err != nil || got.FixURL != r.FixURL {
		t.Errorf("get = %+v, %v", got, err)
	}
	if _, err := e.st.GetRootCause(e.ctx, 9999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing: %v, want ErrNotFound", err)
	}
	r.ID = 9999
	if _, err := e.st.PutRootCause(e.ctx, r); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update missing: %v, want ErrNotFound", err)
	}
	for _, bad := range []store.RootCause{
		{Repo: "acme/llm", RecordedBy: "x"},
		{Cause: "c", RecordedBy: "x"},
		{Repo: "acme/llm", Cause: "c"},
		{Repo: "acme/llm", Cause: "c", RecordedBy: "x", Signature: json.RawMessage(`{"broken`)},
	} {
		if _, err := e.st.PutRootCause(e.ctx, bad); err == nil {
			t.Errorf("PutRootCause(%+v) accepted", bad)
		}
	}
}

func testBisects(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	state := json.RawMessage(`{"version":1,"commits":[{"sha":"a"},{"sha":"b"}],"lo":0,"hi":1}`)
	in := store.BisectRecord{Repo: "acme/llm", GoodSHA: "aaaa", BadSHA: "bbbb", Metric: "tpot_p90", RequestedBy: "maintainer",
		Number: 7, ChangePointID: 3, InstallationID: 4242, State: state, JobID: 41}
	b, err := e.st.CreateBisect(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == 0 || b.Status != store.BisectRunning || b.Version != 1 || b.Number != 7 || b.InstallationID != 4242 || b.JobID != 41 || string(b.State) != string(state) {
		t.Fatalf("created = %+v", b)
	}
	if _, err := e.st.CreateBisect(e.ctx, in); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second running bisect of the same range: %v, want ErrConflict", err)
	}
	otherMetric := in
	otherMetric.Metric = "ttft_p90"
	if _, err := e.st.CreateBisect(e.ctx, otherMetric); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second bisect waiting for job 41: %v, want ErrConflict", err)
	}
	otherMetric.JobID = 0
	if _, err := e.st.CreateBisect(e.ctx, otherMetric); err != nil {
		t.Errorf("another metric of the same range: %v", err)
	}

	// Two replicas load version 1; the first update wins, the second is
	// refused and must reload.
	e.clock.Advance(time.Minute)
	next := json.RawMessage(`{"version":1,"commits":[{"sha":"a","values":[1.5]},{"sha":"b"}],"lo":0,"hi":1}`)
	if got, err := e.st.BisectByJob(e.ctx, 41); err != nil || got.ID != b.ID {
		t.Fatalf("bisect of job 41 = %+v, %v", got, err)
	}
	up, err := e.st.UpdateBisect(e.ctx, b.ID, 1, store.BisectUpdate{Status: store.BisectRunning, State: next, JobID: 42})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != 2 || string(up.State) != string(next) || up.JobID != 42 || !up.UpdatedAt.After(up.CreatedAt) {
		t.Fatalf("updated = %+v", up)
	}
	if got, err := e.st.BisectByJob(e.ctx, 42); err != nil || got.ID != b.ID {
		t.Errorf("bisect of job 42 = %+v, %v", got, err)
	}
	if _, err := e.st.BisectByJob(e.ctx, 41); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bisect of the job it no longer waits for: %v, want ErrNotFound", err)
	}
	replica := e.open(t)
	if _, err := replica.UpdateBisect(e.ctx, b.ID, 1, store.BisectUpdate{Status: store.BisectRunning, State: next}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale update: %v, want ErrConflict", err)
	}
	if _, err := e.st.UpdateBisect(e.ctx, b.ID, 2, store.BisectUpdate{Status: "paused", State: next}); err == nil {
		t.Error("unknown status accepted")
	}
	if _, err := e.st.UpdateBisect(e.ctx, b.ID, 2, store.BisectUpdate{Status: store.BisectDone, State: json.RawMessage(`{`)}); err == nil {
		t.Error("broken state accepted")
	}
	if _, err := e.st.UpdateBisect(e.ctx, 9999, 1, store.BisectUpdate{Status: store.BisectDone, State: next}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update missing: %v, want ErrNotFound", err)
	}
	done, err := e.st.UpdateBisect(e.ctx, b.ID, 2, store.BisectUpdate{Status: store.BisectDone, State: next})
	if err != nil || done.Status != store.BisectDone || done.JobID != 0 {
		t.Fatalf("done = %+v, %v", done, err)
	}
	if _, err := e.st.BisectByJob(e.ctx, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bisect of job 0: %v, want ErrNotFound", err)
	}
	// Once done, the same range may be bisected again.
	if _, err := e.st.CreateBisect(e.ctx, in); err != nil {
		t.Errorf("bisect again after the first is done: %v", err)
	}
	running, err := e.st.ListBisects(e.ctx, store.BisectFilter{Status: store.BisectRunning})
	if err != nil || len(running) != 2 || running[0].Metric != "ttft_p90" {
		t.Fatalf("running = %+v, %v", running, err)
	}
	if all, err := e.st.ListBisects(e.ctx, store.BisectFilter{Repo: "acme/llm"}); err != nil || len(all) != 3 || all[0].ID != b.ID {
		t.Errorf("all = %d, %v", len(all), err)
	}
	got, err := replica.GetBisect(e.ctx, b.ID)
	if err != nil || got.Version != 3 || got.Status != store.BisectDone {
		t.Errorf("get from the replica = %+v, %v", got, err)
	}
	if _, err := e.st.GetBisect(e.ctx, 9999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing: %v, want ErrNotFound", err)
	}
	if _, err := e.st.CreateBisect(e.ctx, store.BisectRecord{Repo: "acme/llm", State: state}); err == nil {
		t.Error("bisect without range and metric accepted")
	}
}
