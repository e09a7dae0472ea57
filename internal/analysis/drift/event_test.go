package drift

import (
	"testing"
	"time"
)

// cp is a regression change point of metric on key at night d, changed by
// change with relative noise sigma either side.
func cp(id int64, key, metric string, d int, change, sigma float64) ChangePoint {
	return ChangePoint{ID: id, Repo: "acme/llm", Key: key, Metric: metric, Day: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, d),
		MeanBefore: 100, MeanAfter: 100 * (1 + change), StdBefore: 100 * sigma, StdAfter: 100 * sigma, Change: change, Regression: true, State: Open}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	steady := cp(1, "nightly/c=1", "tpot_median", 20, 0.08, 0.01)
	steady64 := cp(2, "nightly/c=64", "tpot_median", 20, 0.08, 0.012)
	// The issue's noisy ttft_p99, placed two nights early.
	early := cp(3, "nightly/c=1", "ttft_p99", 18, 0.08, 0.04)
	// A noisy p99 alone, far from any steady change point.
	lonely := cp(4, "nightly/c=64", "ttft_p99", 5, 0.09, 0.04)
	improvement := cp(5, "nightly/c=1", "output_throughput", 20, 0.08, 0.01)
	improvement.Regression = false
	told := cp(6, "nightly/c=1", "e2el_median", 40, 0.1, 0.01)
	told.IssueNumber = 9
	late := cp(7, "nightly/c=64", "e2el_median", 41, 0.1, 0.01)

	events, riding := Events([]ChangePoint{early, lonely, steady64, steady, improvement, told, late})
	if len(events) != 2 {
		t.Fatalf("%d events, want 2 (the told one, the new step)", len(events))
	}
	if e := events[0]; e.Issue != 9 || len(e.Members) != 2 || e.Members[1].ID != late.ID {
		t.Errorf("the told event: issue %d, members %v; want #9 joined by the change point a night later", e.Issue, ids(e.Members))
	}
	e := events[1]
	if got := ids(e.Members); len(got) != 3 || got[0] != steady.ID || got[1] != steady64.ID || got[2] != early.ID {
		t.Errorf("the new step's members %v; want [1 2 3]: the steady leader first, the noisy p99 riding along", got)
	}
	if len(riding) != 1 || riding[0].ID != lonely.ID {
		t.Errorf("riding %v; want the lonely noisy p99 (it may not open an issue on its own)", ids(riding))
	}
	if Leads(early) || !Leads(steady) {
		t.Errorf("effects: noisy %.1f leads %v, steady %.1f leads %v", Effect(early), Leads(early), Effect(steady), Leads(steady))
	}
}

func ids(cs []ChangePoint) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// TestTouch: an issue is edited when a steady member joined, moved or
// left this pass — not when only a noisy one did.
func TestTouch(t *testing.T) {
	t.Parallel()
	on := func(c ChangePoint, issue int) ChangePoint { c.IssueNumber = issue; return c }
	steady := on(cp(1, "nightly/c=1", "tpot_median", 20, 0.08, 0.01), 9)
	noisy := on(cp(2, "nightly/c=1", "ttft_p99", 20, 0.08, 0.04), 9)
	newSteady := cp(3, "nightly/c=64", "tpot_median", 20, 0.08, 0.01)
	newNoisy := cp(4, "nightly/c=64", "ttft_p99", 20, 0.08, 0.04)
	goneSteady := on(cp(5, "nightly/c=64", "e2el_median", 20, 0.08, 0.01), 9)
	goneSteady.State = Gone
	cases := []struct {
		name    string
		all     []ChangePoint
		touched map[int64]bool
		want    bool
	}{
		{"nothing moved", []ChangePoint{steady, noisy}, nil, false},
		{"a noisy member moved", []ChangePoint{steady, noisy}, map[int64]bool{2: true}, false},
		{"a noisy member joined", []ChangePoint{steady, noisy, newNoisy}, map[int64]bool{4: true}, false},
		{"the steady member moved", []ChangePoint{steady, noisy}, map[int64]bool{1: true}, true},
		{"a steady member joined", []ChangePoint{steady, noisy, newSteady}, map[int64]bool{3: true}, true},
		{"a steady member left", []ChangePoint{steady, noisy, goneSteady}, map[int64]bool{5: true}, true},
		{"a steady member left before this pass", []ChangePoint{steady, noisy, goneSteady}, nil, false},
	}
	for _, tc := range cases {
		events, _ := Events(tc.all)
		Touch(events, tc.all, tc.touched)
		if len(events) != 1 || events[0].Issue != 9 || events[0].Touched != tc.want {
			t.Errorf("%s: %d events, touched %v; want issue #9 touched %v", tc.name, len(events), len(events) > 0 && events[0].Touched, tc.want)
		}
	}
}

// TestRetractions: an issue is retracted when all of its change points
// went, not while one is still open or its event is live.
func TestRetractions(t *testing.T) {
	t.Parallel()
	state := func(c ChangePoint, issue int, s string) ChangePoint { c.IssueNumber, c.State = issue, s; return c }
	a := state(cp(1, "nightly/c=1", "tpot_median", 20, 0.08, 0.01), 9, Gone)
	b := state(cp(2, "nightly/c=64", "tpot_median", 20, 0.08, 0.01), 9, Gone)
	open := state(cp(3, "nightly/c=64", "e2el_median", 20, 0.08, 0.01), 9, Open)
	done := state(cp(4, "nightly/c=1", "tpot_median", 5, 0.08, 0.01), 4, Retracted)
	other := state(cp(5, "nightly/c=1", "itl_median", 30, 0.08, 0.01), 11, Gone)

	rs := Retractions([]ChangePoint{other, a, done, b}, nil)
	if len(rs) != 2 || rs[0].Issue != 11 || rs[1].Issue != 9 || len(rs[1].Members) != 2 {
		t.Errorf("retractions %+v; want #11 then #9 with its two records, not the retracted #4", rs)
	}
	if rs := Retractions([]ChangePoint{a, b, open}, nil); len(rs) != 0 {
		t.Errorf("an open member keeps the issue: %+v", rs)
	}
	if rs := Retractions([]ChangePoint{a, b}, []*Event{{Issue: 9}}); len(rs) != 0 {
		t.Errorf("a live event keeps the issue: %+v", rs)
	}
}
