package fleet

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPriority(t *testing.T) {
	cases := []struct {
		tier, kind string
		want       int
	}{
		{"merge", "merge_group", PriorityMerge},
		{"quick", "merge_group", PriorityMerge}, // the merge queue's job, whatever its tier
		{"merge", "pull_request_review.submitted", PriorityMerge},
		{"quick", "pull_request.synchronize", PriorityQuick},
		{"quick", "baseline", PriorityQuick},
		{"nightly", "nightly", PriorityNightly},
		{"quick", "nightly", PriorityNightly},
		{"quick", "bisect", PriorityBatch},
		{"custom", "", PriorityBatch},
	}
	for _, tc := range cases {
		if got := Priority(tc.tier, tc.kind); got != tc.want {
			t.Errorf("Priority(%q, %q) = %d, want %d", tc.tier, tc.kind, got, tc.want)
		}
	}
	if PriorityName(PriorityMerge) != "merge" || PriorityName(7) != "batch" {
		t.Error("PriorityName")
	}
}

func TestShares(t *testing.T) {
	s := Shares{Weights: map[string]float64{"acme/inference": 4, "acme": 2}}
	for key, want := range map[string]float64{"acme/inference": 4, "acme/other": 2, "zeta/x": 1, "acme": 2} {
		if got := s.Weight(key); got != want {
			t.Errorf("Weight(%q) = %g, want %g", key, got, want)
		}
	}
	if s.Key("acme/x") != "acme/x" {
		t.Error("repository key")
	}
	inst := Shares{By: ShareByInstallation}
	if inst.Key("acme/x") != "acme" {
		t.Error("installation key")
	}
	if err := s.Validate(); err != nil {
		t.Errorf("valid shares: %v", err)
	}
	bad := Shares{By: "team", Weights: map[string]float64{"": 1, "a/b/c": 1, "neg": -1, "ok": 2}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad shares accepted")
	}
	for _, want := range []string{`share_by "team"`, `weight "": empty owner`, `weight "a/b/c"`, "weight of neg is -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := (Shares{By: ShareByInstallation, Weights: map[string]float64{"acme/x": 2}}).Validate(); err == nil || !strings.Contains(err.Error(), `weigh the owner ("acme")`) {
		t.Errorf("repository weight under installation shares: %v", err)
	}
	w, err := ParseWeights(" acme/inference=4, acme=2.5 ,")
	if err != nil || !reflect.DeepEqual(w, map[string]float64{"acme/inference": 4, "acme": 2.5}) {
		t.Errorf("ParseWeights = %v, %v", w, err)
	}
	for _, in := range []string{"acme", "acme=x"} {
		if _, err := ParseWeights(in); err == nil {
			t.Errorf("ParseWeights(%q) accepted", in)
		}
	}
}

func TestCardLabels(t *testing.T) {
	h100 := Card{UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "550.54.15"}
	cases := []struct {
		name  string
		cards []Card
		want  []string
	}{
		{"none", nil, nil},
		{"h100", []Card{h100}, []string{"driver-550", "driver-550.54.15", "gpu", "h100", "mem-80gb", "nvidia-h100-80gb-hbm3"}},
		{"a100 sxm", []Card{{Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960}}, []string{"a100", "gpu", "mem-40gb", "nvidia-a100-sxm4-40gb"}},
		{"geforce", []Card{{Model: "NVIDIA GeForce RTX 4090"}}, []string{"gpu", "nvidia-geforce-rtx-4090", "rtx-4090"}},
		{"l40s driver without dots", []Card{{Model: "NVIDIA L40S", Driver: "550"}}, []string{"driver-550", "gpu", "l40s", "nvidia-l40s"}},
		{"two h100s", []Card{h100, {UUID: "GPU-2", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Driver: "550.54.15"}},
			[]string{"driver-550", "driver-550.54.15", "gpu", "h100", "mem-80gb", "nvidia-h100-80gb-hbm3"}},
		{"mixed cards keep what both have", []Card{h100, {Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Driver: "550.54.15"}},
			[]string{"driver-550", "driver-550.54.15", "gpu", "mem-80gb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CardLabels(tc.cards); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CardLabels = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMinutes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second: "under a minute", 4 * time.Minute: "4 min", 4*time.Minute + 40*time.Second: "5 min",
		12 * time.Minute: "10 min", 13 * time.Minute: "15 min", 58 * time.Minute: "1 h",
		80 * time.Minute: "1 h 20 min", 3 * time.Hour: "3 h",
	} {
		if got := Minutes(d); got != want {
			t.Errorf("Minutes(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestEstimate(t *testing.T) {
	ten := func(string, string) time.Duration { return 10 * time.Minute }
	gpu := []string{"gpu"}
	t.Run("one runner, a line", func(t *testing.T) {
		q := []Queued{{ID: 1, Labels: gpu}, {ID: 2, Labels: gpu}, {ID: 3, Labels: gpu}}
		r := []Runner{{Name: "a", Labels: gpu, Available: true, BusyFor: 3 * time.Minute}}
		got := Estimate(q, r, ten)
		want := map[int64]Place{1: {Ahead: 0, Wait: 3 * time.Minute}, 2: {Ahead: 1, Wait: 13 * time.Minute}, 3: {Ahead: 2, Wait: 23 * time.Minute}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Estimate = %v, want %v", got, want)
		}
		if n := got[3].Note(q[2]); n != "2 ahead, about 25 min" {
			t.Errorf("note = %q", n)
		}
		if n := got[1].Note(q[0]); n != "next in line, about 3 min" {
			t.Errorf("note = %q", n)
		}
	})
	t.Run("two runners share the line", func(t *testing.T) {
		q := []Queued{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
		r := []Runner{{Name: "a", Available: true}, {Name: "b", Available: true, BusyFor: 5 * time.Minute}}
		got := Estimate(q, r, ten)
		waits := []time.Duration{got[1].Wait, got[2].Wait, got[3].Wait, got[4].Wait}
		if !reflect.DeepEqual(waits, []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute}) {
			t.Errorf("waits = %v", waits)
		}
		if got[1].Note(q[0]) != "next in line, starting now" {
			t.Errorf("note = %q", got[1].Note(q[0]))
		}
	})
	t.Run("pools do not count each other", func(t *testing.T) {
		a100, h100 := []string{"gpu", "a100"}, []string{"gpu", "h100"}
		q := []Queued{{ID: 1, Labels: a100}, {ID: 2, Labels: a100}, {ID: 3, Labels: h100}, {ID: 4, Labels: gpu}}
		r := []Runner{{Name: "a", Labels: a100, Available: true}, {Name: "h", Labels: h100, Available: true}}
		got := Estimate(q, r, ten)
		if got[3].Ahead != 0 || got[3].Wait != 0 {
			t.Errorf("h100 job behind a100 jobs: %+v", got[3])
		}
		// The unlabelled-gpu job can go to either: it competes with all.
		if got[4].Ahead != 3 || got[4].Wait != 10*time.Minute {
			t.Errorf("any-gpu job = %+v, want 3 ahead, 10 min", got[4])
		}
	})
	t.Run("pinned job waits for its card", func(t *testing.T) {
		q := []Queued{{ID: 1, GPUUUID: "GPU-x"}, {ID: 2}}
		r := []Runner{{Name: "x", GPUUUIDs: []string{"GPU-x"}, Available: false}, {Name: "y", GPUUUIDs: []string{"GPU-y"}, Available: true}}
		got := Estimate(q, r, ten)
		if !got[1].NoRunner || got[2].NoRunner || got[2].Ahead != 0 {
			t.Errorf("places = %+v", got)
		}
		if n := got[1].Note(q[0]); !strings.Contains(n, "waiting for card GPU-x") {
			t.Errorf("note = %q", n)
		}
	})
	t.Run("scales with pools, not runners squared", func(t *testing.T) {
		var q []Queued
		for i := range 10000 {
			q = append(q, Queued{ID: int64(i), Tier: "quick", Labels: []string{"gpu", []string{"a100", "h100"}[i%2]}})
		}
		var r []Runner
		for i := range 100 {
			r = append(r, Runner{Labels: []string{"gpu", []string{"a100", "h100"}[i%2]}, Available: true})
		}
		start := time.Now()
		got := Estimate(q, r, ten)
		if len(got) != 10000 || got[9999].Ahead != 4999 {
			t.Errorf("last job = %+v", got[9999])
		}
		t.Logf("10,000 jobs, 100 runners: %v", time.Since(start))
	})
}

func TestDurations(t *testing.T) {
	d := NewDurations([]Sample{
		{Tier: "quick", Pool: "gpu", Took: 4 * time.Minute}, {Tier: "quick", Pool: "gpu", Took: 6 * time.Minute},
		{Tier: "quick", Pool: "gpu,h100", Took: 3 * time.Minute},
	})
	if got := d.Of("quick", "gpu"); got != 5*time.Minute {
		t.Errorf("pool median = %v", got)
	}
	if got := d.Of("quick", "gpu,a100"); got != 4*time.Minute {
		t.Errorf("tier median = %v", got)
	}
	if got := d.Of("merge", "gpu"); got != DefaultDuration("merge") {
		t.Errorf("default = %v", got)
	}
}

func TestReusedBaseline(t *testing.T) {
	for _, tc := range []struct {
		design string
		job    int64
		want   bool
	}{{"stored", 0, true}, {"recent", 0, true}, {"stored", 7, false}, {"interleaved", 0, false}, {"", 0, false}} {
		if got := ReusedBaseline(tc.design, tc.job); got != tc.want {
			t.Errorf("ReusedBaseline(%q, %d) = %v", tc.design, tc.job, got)
		}
	}
}

func TestWeeksBack(t *testing.T) {
	sun := time.Date(2025, 3, 9, 23, 0, 0, 0, time.UTC) // end of 2025-W10
	if got := WeeksBack(sun, 1); !got.Equal(time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("this week starts %v", got)
	}
	if got := WeeksBack(sun, 8); !got.Equal(time.Date(2025, 1, 13, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("8 weeks start %v", got)
	}
}

func TestUsage(t *testing.T) {
	mon := time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC) // 2025-W10
	rows := Usage(
		[]UsageAttempt{
			{JobID: 1, Repo: "a/x", Tier: "quick", Started: mon, Ended: mon.Add(30 * time.Minute)},
			{JobID: 1, Repo: "a/x", Tier: "quick", Started: mon.Add(time.Hour), Ended: mon.Add(90 * time.Minute)}, // a retry
			{JobID: 2, Repo: "a/x", Tier: "merge", Started: mon, Ended: mon.Add(2 * time.Hour)},
			{JobID: 3, Repo: "a/x", Tier: "quick", Started: mon.Add(-24 * time.Hour), Ended: mon.Add(-23 * time.Hour)}, // Sunday: W09
		},
		[]UsageReuse{{Repo: "a/x", Tier: "quick", Created: mon}},
		// s1's retest confirms it: counted (and priced) once.
		[]UsageRegression{{Repo: "a/x", Tier: "quick", SHA: "s1", At: mon, MonthlyUSD: 2500}, {Repo: "a/x", Tier: "quick", SHA: "s1", At: mon.Add(time.Hour), MonthlyUSD: 2600}, {Repo: "a/x", Tier: "quick", SHA: "s2", At: mon, MonthlyUSD: 400}},
	)
	want := []UsageRow{
		{Repo: "a/x", Tier: "merge", Week: "2025-W10", WeekStart: time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC), GPUHours: 2, Jobs: 1},
		{Repo: "a/x", Tier: "quick", Week: "2025-W10", WeekStart: time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC), GPUHours: 1, Jobs: 1, BaselineReuse: 1, Regressions: 2, RegressionUSDMonth: 2900},
		{Repo: "a/x", Tier: "quick", Week: "2025-W09", WeekStart: time.Date(2025, 2, 24, 0, 0, 0, 0, time.UTC), GPUHours: 1, Jobs: 1},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("Usage =\n%+v\nwant\n%+v", rows, want)
	}
}

func TestRunnerState(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	recent, old := now.Add(-time.Minute), now.Add(-3*time.Minute)
	for _, tc := range []struct {
		drained, busy bool
		seen          time.Time
		want          string
	}{
		{false, false, recent, StateIdle}, {false, true, recent, StateBusy}, {true, true, recent, StateDraining},
		{true, false, recent, StateDrained}, {false, true, old, StateOffline}, {true, false, old, StateOffline},
	} {
		if got := RunnerState(tc.drained, tc.busy, tc.seen, now); got != tc.want {
			t.Errorf("RunnerState(drained %v, busy %v, seen %v ago) = %s, want %s", tc.drained, tc.busy, now.Sub(tc.seen), got, tc.want)
		}
	}
}
