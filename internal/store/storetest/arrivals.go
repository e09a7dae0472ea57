package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
)

// testFleetArrivals: the queue estimate's inputs. Arrivals counts the
// jobs queued over the mix window by class, tenant, tier and pool, and
// those of the recent window; ListQueue carries each job's fair-share
// place and aging time.
func testFleetArrivals(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	e.enqueue(t, store.JobSpec{Repo: "acme/a", Tier: "quick", Labels: []string{"gpu"}, PRNumber: 1}) // before the window
	e.clock.Advance(4 * time.Hour)
	e.enqueue(t, store.JobSpec{Repo: "acme/a", Tier: "quick", Labels: []string{"gpu"}, PRNumber: 2})
	e.clock.Advance(150 * time.Minute)
	e.enqueue(t, store.JobSpec{Repo: "acme/a", Tier: "quick", Labels: []string{"gpu"}, PRNumber: 3})
	e.enqueue(t, store.JobSpec{Repo: "acme/b", Tier: "merge", Kind: "merge_group"})
	nightly := e.enqueue(t, store.JobSpec{Repo: "acme/b", Tier: "nightly", Kind: "nightly", Labels: []string{"gpu", "a100"}})
	now := e.clock.Now()
	got, err := e.st.Arrivals(e.ctx, now.Add(-fleet.MixWindow), now.Add(-fleet.ArrivalWindow))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b fleet.Arrived) int { return a.Priority - b.Priority })
	type row struct {
		prio               int
		tenant, tier, pool string
		count, recent      int
	}
	var rows []row
	for _, a := range got {
		rows = append(rows, row{a.Priority, a.Tenant, a.Tier, a.Pool, a.Count, a.Recent})
		if a.Cost <= 0 {
			t.Errorf("%+v: no cost", a)
		}
	}
	want := []row{
		{fleet.PriorityMerge, "acme/b", "merge", "", 1, 1},
		{fleet.PriorityQuick, "acme/a", "quick", "gpu", 2, 1},
		{fleet.PriorityNightly, "acme/b", "nightly", "a100,gpu", 1, 1},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("arrivals = %+v, want %+v", rows, want)
	}
	queue, err := e.st.ListQueue(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queue {
		if q.ShareKey == "" || q.VCost <= 0 {
			t.Errorf("job %d: no fair-share place: %+v", q.ID, q)
		}
		if q.ID == nightly.ID && !q.AgeAt.Equal(now.Add(fleet.AgeAfter(fleet.PriorityNightly))) {
			t.Errorf("nightly job ages at %v, want %v", q.AgeAt, now.Add(fleet.AgeAfter(fleet.PriorityNightly)))
		}
		if q.Priority == fleet.PriorityQuick && !q.AgeAt.IsZero() {
			t.Errorf("quick job %d ages at %v", q.ID, q.AgeAt)
		}
	}
}
