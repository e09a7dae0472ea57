package drift

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/changepoint"
)

// opts are the pass's detector settings (internal/github/drift: 3%).
var opts = changepoint.Options{MinMagnitude: 0.03}

// nights is a 30-night series at 100 with ±1% of deterministic noise that
// steps by step from night stepNight on (never, when it is negative).
func nights(stepNight int, step float64) []Night {
	start := time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)
	out := make([]Night, 30)
	for i := range out {
		v := 100 * (1 + 0.01*math.Sin(float64(i)*2.3))
		if stepNight >= 0 && i >= stepNight {
			v *= 1 + step
		}
		out[i] = Night{Date: start.AddDate(0, 0, i), Value: v, SHA: fmt.Sprintf("%040d", i), JobID: int64(100 + i)}
	}
	return out
}

var tpot = Series{Repo: "acme/llm", Key: "nightly/c=1", Metric: "tpot_median"}

func TestReconcileNewStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		metric     string
		step       float64
		regression bool
	}{
		{"tpot_median", 0.10, true},        // latency up: worse
		{"tpot_median", -0.10, false},      // latency down: better
		{"output_throughput", -0.10, true}, // throughput down: worse
		{"output_throughput", 0.10, false}, // throughput up: better
	} {
		s := tpot
		s.Metric = tc.metric
		out := Reconcile(s, nights(20, tc.step), nil, opts)
		if out.Found != 1 || out.New != 1 || out.Updated != 0 || out.Pending != 0 || len(out.Put) != 1 || len(out.Gone) != 0 {
			t.Fatalf("%s %+.0f%%: %+v; want one new change point to store", tc.metric, 100*tc.step, out)
		}
		c := out.Put[0]
		if c.ID != 0 || c.State != Open || c.Regression != tc.regression || c.GoodSHA != fmt.Sprintf("%040d", 19) || c.BadSHA != fmt.Sprintf("%040d", 20) ||
			c.GoodJobID != 119 || c.BadJobID != 120 || !c.Day.Equal(nights(-1, 0)[20].Date) || math.Abs(c.Change-tc.step) > 0.02 || c.Repo != s.Repo || c.Key != s.Key {
			t.Errorf("%s %+.0f%%: %+v; want a change of about that from night 20, regression %v", tc.metric, 100*tc.step, c, tc.regression)
		}
	}
}

func TestReconcileAgainstRecords(t *testing.T) {
	t.Parallel()
	found := Reconcile(tpot, nights(20, 0.10), nil, opts).Put[0]
	told := found
	told.ID, told.IssueNumber, told.IssueURL, told.SlackSent = 7, 3, "https://github.com/acme/llm/issues/3", true
	nudged := told
	nudged.Change -= MaterialChange / 2
	shifted := told
	shifted.Change -= 2 * MaterialChange
	dayLater := told
	dayLater.Day = dayLater.Day.AddDate(0, 0, 1)
	retracted := told
	retracted.State = Retracted
	gone := told
	gone.State = Gone
	far := told
	far.Day = far.Day.AddDate(0, 0, -10)
	improvement := told
	improvement.Regression = false

	cases := []struct {
		name                  string
		existing              []ChangePoint
		new, updated, goneOut int
		put                   *ChangePoint // the record stored, nil for none
	}{
		{"the same step, told", []ChangePoint{told}, 0, 0, 0, nil},
		{"nudged under MaterialChange", []ChangePoint{nudged}, 0, 0, 0, nil},
		{"moved by MaterialChange or more", []ChangePoint{shifted}, 0, 1, 0, &told},
		{"a day later", []ChangePoint{dayLater}, 0, 1, 0, &told},
		{"back from gone", []ChangePoint{gone}, 0, 1, 0, &told},
		{"back after its issue was retracted: told anew", []ChangePoint{retracted}, 0, 1, 0, &found},
		{"a record ten days off is another step", []ChangePoint{far}, 1, 0, 1, &found},
		{"an improvement is not the regression's record", []ChangePoint{improvement}, 1, 0, 1, &found},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Reconcile(tpot, nights(20, 0.10), tc.existing, opts)
			if out.Found != 1 || out.New != tc.new || out.Updated != tc.updated || len(out.Gone) != tc.goneOut {
				t.Errorf("found %d new %d updated %d gone %d; want 1, %d, %d, %d", out.Found, out.New, out.Updated, len(out.Gone), tc.new, tc.updated, tc.goneOut)
			}
			for _, g := range out.Gone {
				if g.ID != tc.existing[0].ID || g.State != Gone {
					t.Errorf("gone %+v; want record %d marked gone", g, tc.existing[0].ID)
				}
			}
			switch {
			case tc.put == nil && len(out.Put) != 0:
				t.Errorf("stores %+v; want nothing rewritten", out.Put)
			case tc.put != nil && len(out.Put) != 1:
				t.Errorf("stores %d records, want 1", len(out.Put))
			case tc.put != nil:
				want, got := *tc.put, out.Put[0]
				if tc.goneOut == 0 {
					want.ID = tc.existing[0].ID
				}
				if got != want {
					t.Errorf("stores\n %+v\nwant\n %+v", got, want)
				}
			}
		})
	}
}

// A step seen on the last night alone is pending: nothing is stored, and
// the record it may be (the step, moved to the newest night) is neither
// rewritten nor marked gone.
func TestReconcilePendingOnTheLastNight(t *testing.T) {
	t.Parallel()
	last := Reconcile(tpot, nights(28, 0.10), nil, opts).Put[0]
	last.ID, last.Day = 9, last.Day.AddDate(0, 0, 1)
	out := Reconcile(tpot, nights(29, 0.10), []ChangePoint{last}, opts)
	if out.Pending != 1 || out.Found != 0 || len(out.Put) != 0 || len(out.Gone) != 0 {
		t.Errorf("%+v; want one pending change point and the record left alone", out)
	}
	if out := Reconcile(tpot, nights(-1, 0), []ChangePoint{last}, opts); out.Found != 0 || len(out.Gone) != 1 {
		t.Errorf("a flat series: %+v; want the open record gone", out)
	}
}
