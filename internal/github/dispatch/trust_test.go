package dispatch

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// Heads lists every commit perfgate recorded a check of for the pull
// request, each once, with when it first did: what a `/perf approve`
// prefix is checked against.
func TestHeadsOfPR(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	svc, st := newService(t, ghtest.New(t), filepath.Join(t.TempDir(), "db"), clock)
	defer st.Close()
	const (
		first  = "9f4c3e1000000000000000000000000000000000"
		second = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"
	)
	wait := func(sha string, tier check.Tier, pr int) {
		t.Helper()
		if err := svc.Conclude(ctx, request.Conclude{InstallationID: 1, Owner: "acme", Repo: "inference", PR: pr, HeadSHA: sha, Tier: tier,
			Phase: check.Waiting, Output: check.Output{Title: "Waiting for approval", Summary: "s"}}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := clock.now()
	wait(first, check.TierQuick, 17)
	clock.add(time.Minute)
	wait(first, check.TierMerge, 17) // a second check of the same head
	clock.add(time.Hour)
	wait(second, check.TierQuick, 17)
	wait("ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12", check.TierQuick, 18) // another PR
	heads, err := svc.Heads(ctx, "acme/inference", 17)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Time{}
	for _, h := range heads {
		if _, dup := got[h.SHA]; dup {
			t.Errorf("%s listed twice", h.SHA)
		}
		got[h.SHA] = h.First
	}
	if len(got) != 2 || !got[first].Equal(t0) || !got[second].Equal(t0.Add(time.Minute+time.Hour)) {
		t.Fatalf("heads %+v; want %s first seen at %s and %s an hour later", heads, first, t0, second)
	}
}
