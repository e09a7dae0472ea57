package dispatch

import (
	"testing"

	"github.com/perfgate/perfgate/internal/store"
)

func TestOnDefaultBranch(t *testing.T) {
	l := newLifecycle(t)
	job := func(tier, kind string) int64 {
		j, err := l.st.Enqueue(l.ctx, store.JobSpec{Repo: testRepo, Tier: tier, Kind: kind, HeadSHA: headSHA})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	cases := []struct {
		name string
		cr   store.CheckRun
		want bool
	}{
		{"nightly", store.CheckRun{Tier: "nightly", JobIDs: []int64{job("nightly", "nightly")}}, true},
		{"merge queue group", store.CheckRun{Tier: "merge", JobIDs: []int64{job("merge", "merge_group")}}, true},
		{"merge tier on an approved PR", store.CheckRun{Tier: "merge", JobIDs: []int64{job("merge", "approval")}}, false},
		{"quick", store.CheckRun{Tier: "quick", JobIDs: []int64{job("quick", "pull_request")}}, false},
		{"merge without jobs", store.CheckRun{Tier: "merge"}, false},
	}
	for _, tc := range cases {
		if got := l.svc.onDefaultBranch(l.ctx, tc.cr); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
