package drift

import (
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// cp is a regression change point of metric on key at night d, changed by
// change with relative noise sigma either side.
func cp(id int64, key, metric string, d int, change, sigma float64) store.ChangePointRecord {
	return store.ChangePointRecord{ID: id, Repo: "acme/llm", Key: key, Metric: metric, Day: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, d),
		MeanBefore: 100, MeanAfter: 100 * (1 + change), StdBefore: 100 * sigma, StdAfter: 100 * sigma, Change: change, Regression: true, State: store.ChangePointOpen}
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

	events, riding := Events([]store.ChangePointRecord{early, lonely, steady64, steady, improvement, told, late})
	if len(events) != 2 {
		t.Fatalf("%d events, want 2 (the told one, the new step)", len(events))
	}
	if e := events[0]; e.issue != 9 || len(e.members) != 2 || e.members[1].ID != late.ID {
		t.Errorf("the told event: issue %d, members %v; want #9 joined by the change point a night later", e.issue, ids(e.members))
	}
	e := events[1]
	if got := ids(e.members); len(got) != 3 || got[0] != steady.ID || got[1] != steady64.ID || got[2] != early.ID {
		t.Errorf("the new step's members %v; want [1 2 3]: the steady leader first, the noisy p99 riding along", got)
	}
	if len(riding) != 1 || riding[0].ID != lonely.ID {
		t.Errorf("riding %v; want the lonely noisy p99 (it may not open an issue on its own)", ids(riding))
	}
	if Leads(early) || !Leads(steady) {
		t.Errorf("effects: noisy %.1f leads %v, steady %.1f leads %v", Effect(early), Leads(early), Effect(steady), Leads(steady))
	}
}

func ids(cs []store.ChangePointRecord) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
