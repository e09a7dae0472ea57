package fleet

import (
	"math/rand/v2"
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
	// Every job takes exactly 10 minutes: the replays agree.
	ten := NewDurations([]Sample{{Took: 10 * time.Minute}})
	gpu := []string{"gpu"}
	est := func(q []Queued, r []Runner) map[int64]Place {
		return Estimate(Forecast{Queue: q, Runners: r, Durations: ten})
	}
	t.Run("one runner, a line", func(t *testing.T) {
		q := []Queued{{ID: 1, Labels: gpu}, {ID: 2, Labels: gpu}, {ID: 3, Labels: gpu}}
		r := []Runner{{Name: "a", Labels: gpu, Available: true, BusyFor: 3 * time.Minute}}
		got := est(q, r)
		at := func(d time.Duration) (time.Duration, time.Duration, time.Duration) { return d, d, d }
		want := map[int64]Place{1: {Ahead: 0}, 2: {Ahead: 1}, 3: {Ahead: 2}}
		for id, d := range map[int64]time.Duration{1: 3 * time.Minute, 2: 13 * time.Minute, 3: 23 * time.Minute} {
			p := want[id]
			p.Wait, p.Low, p.High = at(d)
			want[id] = p
		}
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
		got := est(q, r)
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
		got := est(q, r)
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
		got := est(q, r)
		if !got[1].NoRunner || got[2].NoRunner || got[2].Ahead != 0 {
			t.Errorf("places = %+v", got)
		}
		if n := got[1].Note(q[0]); !strings.Contains(n, "waiting for card GPU-x") {
			t.Errorf("note = %q", n)
		}
	})
	t.Run("work that overtakes", func(t *testing.T) {
		// A bisect job next in line on a busy runner: merge work arrives
		// six an hour and goes first; a quick job of a tenant with a
		// long line is overtaken by other tenants' new jobs.
		r := []Runner{{Name: "a", Labels: gpu, Available: true, BusyFor: 5 * time.Minute}}
		batch := []Queued{{ID: 1, Labels: gpu, Priority: PriorityBatch, Tenant: "acme/a", Ages: true, AgesIn: 6 * time.Hour}}
		merge := []Stream{{Priority: PriorityMerge, Tenant: "acme/b", Tier: "merge", Pool: "gpu", PerHour: 6, Cost: 600}}
		alone := Estimate(Forecast{Queue: batch, Runners: r, Durations: ten})[1]
		behind := Estimate(Forecast{Queue: batch, Runners: r, Durations: ten, Arrivals: merge})[1]
		if alone.Wait != 5*time.Minute || behind.Wait <= alone.Wait || behind.High <= behind.Low {
			t.Errorf("alone %+v, with merge work arriving %+v: want it later, with a range", alone, behind)
		}
		var line []Queued
		for i := range 6 {
			line = append(line, Queued{ID: int64(i + 1), Labels: gpu, Priority: PriorityQuick, Tenant: "acme/a", Tag: float64(600 * i), Cost: 600})
		}
		others := []Stream{{Priority: PriorityQuick, Tenant: "acme/c", Tier: "quick", Pool: "gpu", PerHour: 3, Cost: 600}}
		own := []Stream{{Priority: PriorityQuick, Tenant: "acme/a", Tier: "quick", Pool: "gpu", PerHour: 3, Cost: 600}}
		last := func(s []Stream) time.Duration {
			return Estimate(Forecast{Queue: line, Runners: r, Durations: ten, Arrivals: s})[6].Wait
		}
		if l, o := last(own), last(others); l != 55*time.Minute || o <= l {
			t.Errorf("last of the line: %v with its own tenant's arrivals (want 55 min), %v with another's (want later)", l, o)
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
		got := est(q, r)
		if len(got) != 10000 || got[9999].Ahead != 4999 {
			t.Errorf("last job = %+v", got[9999])
		}
		t.Logf("10,000 jobs, 100 runners, %d replays: %v", Replays, time.Since(start))
	})
}

func TestSpan(t *testing.T) {
	for _, c := range []struct {
		lo, hi time.Duration
		want   string
	}{
		{12 * time.Minute, 20 * time.Minute, "10–20 min"},
		{4 * time.Minute, 7 * time.Minute, "4–7 min"},
		{10 * time.Second, 5 * time.Minute, "up to 5 min"},
		{50 * time.Minute, 80 * time.Minute, "50 min–1 h 20 min"},
		{13 * time.Minute, 14 * time.Minute, "15 min"},
	} {
		if got := Span(c.lo, c.hi); got != c.want {
			t.Errorf("Span(%v, %v) = %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

func TestDurations(t *testing.T) {
	var s []Sample
	for _, m := range []time.Duration{2, 4, 6, 8, 10} {
		s = append(s, Sample{Tier: "quick", Pool: "gpu", Took: m * time.Minute})
	}
	s = append(s, Sample{Tier: "quick", Pool: "gpu,h100", Took: 3 * time.Minute})
	d := NewDurations(s)
	if got := d.Of("quick", "gpu"); got != 6*time.Minute {
		t.Errorf("pool mean = %v, want 6 min (no floor, no median)", got)
	}
	if got := d.Of("quick", "gpu,h100"); got != 33*time.Minute/6 {
		t.Errorf("one sample in the pool: the tier's mean = %v", got)
	}
	if got := d.Of("merge", "gpu"); got != DefaultDuration("merge") {
		t.Errorf("default = %v", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		// A job that has run 7 minutes ends in 1 or 3 more.
		if l := d.DrawLeft(rng, "quick", "gpu", 7*time.Minute); l != time.Minute && l != 3*time.Minute {
			t.Fatalf("left after 7 min = %v", l)
		}
		if l := d.DrawLeft(rng, "quick", "gpu", time.Hour); l < 0 || l > 6*time.Minute/5 {
			t.Fatalf("left after outrunning them all = %v", l)
		}
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
