package drift

import (
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/cost"
)

// One regression is one alert. A slow commit moves many series — every
// latency metric of every matrix cell — and each gets its own change
// point, a night or two apart where the series is noisy. The pass groups
// the change points of one step into an event: one issue, one Slack
// message, one bisect. Only a change point of a steady metric may start an
// event (LeadEffect); a noisy one (a p99 of a few dozen requests) joins
// the event of a steady one near it, or waits on the dashboard.

// LeadEffect is the smallest change, in units of the series' own noise
// (the pooled night-to-night σ either side, relative to the level before),
// that lets a change point open an issue on its own. An 8% step on a
// median with 1% noise is 8; the same step on a p99 with 4% noise is 2 and
// rides along.
const LeadEffect = 4

// Effect is the change point's change in units of its series' noise; +Inf
// for a series without noise.
func Effect(c ChangePoint) float64 {
	n := Noise(c)
	if n == 0 {
		return math.Inf(1)
	}
	return math.Abs(c.Change) / n
}

// Noise is the series' relative night-to-night noise around the change
// point: the pooled standard deviation of the segments either side over
// the level before.
func Noise(c ChangePoint) float64 {
	if c.MeanBefore == 0 {
		return 0
	}
	return math.Sqrt((c.StdBefore*c.StdBefore+c.StdAfter*c.StdAfter)/2) / math.Abs(c.MeanBefore)
}

// Leads reports whether the change point may open an issue on its own.
func Leads(c ChangePoint) bool { return Effect(c) >= LeadEffect }

// Event is one step's change points, told as one: one issue, one Slack
// message, one bisect.
type Event struct {
	// Issue and URL are the event's issue; 0 and "" until it is opened.
	Issue int
	URL   string
	// Members are ordered: the leader (the steady change point the event
	// is dated by) first.
	Members []ChangePoint
	// Touched: a steady member moved, joined or left this pass, so the
	// issue is to be edited (Touch).
	Touched bool
	// Cost prices the step at the repository's declared price (Price);
	// nil when none is declared.
	Cost *cost.Estimate
}

// Leader is the change point the event is dated, titled and bisected by.
func (e *Event) Leader() ChangePoint { return e.Members[0] }

// near reports whether c belongs to the event: a member's day within
// matchDays of c's.
func (e *Event) near(c ChangePoint) bool {
	for _, m := range e.Members {
		if math.Abs(m.Day.Sub(c.Day).Hours()/24) <= matchDays {
			return true
		}
	}
	return false
}

// Events groups the open regression change points of one repository into
// events: those already told (by their issue) first, then new ones, each
// led by the steadiest unassigned change point that Leads, joined by every
// other within matchDays. The rest (noisy change points with no steady one
// near) are returned as riding.
func Events(open []ChangePoint) (events []*Event, riding []ChangePoint) {
	byIssue := map[int]*Event{}
	var rest []ChangePoint
	for _, c := range open {
		if !c.Regression || c.State != Open {
			continue
		}
		if c.IssueNumber == 0 {
			rest = append(rest, c)
			continue
		}
		e := byIssue[c.IssueNumber]
		if e == nil {
			e = &Event{Issue: c.IssueNumber, URL: c.IssueURL}
			byIssue[c.IssueNumber] = e
			events = append(events, e)
		}
		e.Members = append(e.Members, c)
	}
	for _, e := range events {
		sortMembers(e.Members)
	}
	sort.SliceStable(rest, func(i, j int) bool { return Effect(rest[i]) > Effect(rest[j]) })
	var left []ChangePoint
	for _, c := range rest {
		if join(events, c) {
			continue
		}
		if Leads(c) {
			events = append(events, &Event{Members: []ChangePoint{c}})
			continue
		}
		left = append(left, c)
	}
	// A noisy change point seen before its leader (placed a night or two
	// early) joins the leader's event found after it.
	for _, c := range left {
		if !join(events, c) {
			riding = append(riding, c)
		}
	}
	for _, e := range events {
		if e.Issue == 0 {
			sortMembers(e.Members)
		}
	}
	return events, riding
}

// join adds c to the first event it is near, and reports whether it did.
func join(events []*Event, c ChangePoint) bool {
	for _, e := range events {
		if e.near(c) {
			e.Members = append(e.Members, c)
			return true
		}
	}
	return false
}

// sortMembers puts the leader first: the oldest record that Leads (stable
// across nights, so the bisect started from it is not started again from
// another), then the others by effect.
func sortMembers(ms []ChangePoint) {
	sort.SliceStable(ms, func(i, j int) bool {
		li, lj := Leads(ms[i]), Leads(ms[j])
		if li != lj {
			return li
		}
		if li && ms[i].ID != ms[j].ID && ms[i].ID != 0 && ms[j].ID != 0 {
			return ms[i].ID < ms[j].ID
		}
		return Effect(ms[i]) > Effect(ms[j])
	})
}

// Touch marks the events whose issue is to be opened or edited this pass:
// those a steady member (one that Leads) joined, or that one in touched
// (the IDs of the records this pass stored as moved, found or gone) moved
// in or left. Noisy members come and go from night to night; they are
// written in on the next such edit, not each time. all is the
// repository's every record, events grouped from it.
func Touch(events []*Event, all []ChangePoint, touched map[int64]bool) {
	left := map[int]bool{}
	for _, c := range all {
		if c.IssueNumber != 0 && c.State != Open && touched[c.ID] && Leads(c) {
			left[c.IssueNumber] = true
		}
	}
	for _, e := range events {
		for _, m := range e.Members {
			e.Touched = e.Touched || Leads(m) && (touched[m.ID] || m.IssueNumber == 0)
		}
		e.Touched = e.Touched || left[e.Issue]
	}
}

// Retraction is an issue none of whose change points is still found: it is
// closed saying so, and Slack hears it when it heard the alert.
type Retraction struct {
	Issue   int
	Members []ChangePoint // the issue's gone records
}

// Retractions lists, in the order of all, the issues of gone records that
// no event holds and no open regression keeps alive.
func Retractions(all []ChangePoint, events []*Event) []Retraction {
	live := map[int]bool{}
	for _, e := range events {
		live[e.Issue] = true
	}
	gone := map[int][]ChangePoint{}
	var order []int
	for _, c := range all {
		if c.IssueNumber == 0 || c.State != Gone || live[c.IssueNumber] {
			continue
		}
		if gone[c.IssueNumber] == nil {
			order = append(order, c.IssueNumber)
		}
		gone[c.IssueNumber] = append(gone[c.IssueNumber], c)
	}
	for _, c := range all {
		// A member still open (an improvement never is one) keeps the
		// issue alive.
		if c.IssueNumber != 0 && c.State == Open && c.Regression {
			delete(gone, c.IssueNumber)
		}
	}
	var out []Retraction
	for _, num := range order {
		if recs := gone[num]; recs != nil {
			out = append(out, Retraction{Issue: num, Members: recs})
		}
	}
	return out
}

// SlackSent reports whether Slack heard of any of the change points.
func SlackSent(cs []ChangePoint) bool {
	for _, c := range cs {
		if c.SlackSent {
			return true
		}
	}
	return false
}
