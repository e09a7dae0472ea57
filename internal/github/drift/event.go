package drift

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/store"
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
func Effect(c store.ChangePointRecord) float64 {
	n := Noise(c)
	if n == 0 {
		return math.Inf(1)
	}
	return math.Abs(c.Change) / n
}

// Noise is the series' relative night-to-night noise around the change
// point: the pooled standard deviation of the segments either side over
// the level before.
func Noise(c store.ChangePointRecord) float64 {
	if c.MeanBefore == 0 {
		return 0
	}
	return math.Sqrt((c.StdBefore*c.StdBefore+c.StdAfter*c.StdAfter)/2) / math.Abs(c.MeanBefore)
}

// Leads reports whether the change point may open an issue on its own.
func Leads(c store.ChangePointRecord) bool { return Effect(c) >= LeadEffect }

// event is one step's change points. Members are ordered: the leader
// (the steady change point the event is dated by) first.
type event struct {
	issue   int
	url     string
	members []store.ChangePointRecord
	touched bool // a steady member moved, joined or left this pass
	// cost prices the step at the repository's declared price (cost.go);
	// total sums the repository's open events, for the Slack message.
	cost  *cost.Estimate
	total string
}

func (e *event) leader() store.ChangePointRecord { return e.members[0] }

// near reports whether c belongs to the event: a member's day within
// matchDays of c's.
func (e *event) near(c store.ChangePointRecord) bool {
	for _, m := range e.members {
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
func Events(open []store.ChangePointRecord) (events []*event, riding []store.ChangePointRecord) {
	byIssue := map[int]*event{}
	var rest []store.ChangePointRecord
	for _, c := range open {
		if !c.Regression || c.State != store.ChangePointOpen {
			continue
		}
		if c.IssueNumber == 0 {
			rest = append(rest, c)
			continue
		}
		e := byIssue[c.IssueNumber]
		if e == nil {
			e = &event{issue: c.IssueNumber, url: c.IssueURL}
			byIssue[c.IssueNumber] = e
			events = append(events, e)
		}
		e.members = append(e.members, c)
	}
	for _, e := range events {
		sortMembers(e.members)
	}
	sort.SliceStable(rest, func(i, j int) bool { return Effect(rest[i]) > Effect(rest[j]) })
	var left []store.ChangePointRecord
	for _, c := range rest {
		joined := false
		for _, e := range events {
			if e.near(c) {
				e.members = append(e.members, c)
				joined = true
				break
			}
		}
		if joined {
			continue
		}
		if Leads(c) {
			events = append(events, &event{members: []store.ChangePointRecord{c}})
			continue
		}
		left = append(left, c)
	}
	// A noisy change point seen before its leader (placed a night or two
	// early) joins the leader's event found after it.
	for _, c := range left {
		joined := false
		for _, e := range events {
			if e.near(c) {
				e.members = append(e.members, c)
				joined = true
				break
			}
		}
		if !joined {
			riding = append(riding, c)
		}
	}
	for _, e := range events {
		if e.issue == 0 {
			sortMembers(e.members)
		}
	}
	return events, riding
}

// sortMembers puts the leader first: the oldest record that Leads (stable
// across nights, so the bisect started from it is not started again from
// another), then the others by effect.
func sortMembers(ms []store.ChangePointRecord) {
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

// alerts tells the repository's events: an issue (opened, or edited when a
// member moved, joined or left), one Slack message per event, the bisect
// hook for its leader; and retracts the issues whose change points all
// went.
func (p *Pass) alerts(ctx context.Context, repo string, r *run) error {
	all, err := p.o.Store.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo})
	if err != nil {
		return err
	}
	events, riding := Events(all)
	r.sum.Riding += len(riding)
	// An issue is edited when a steady member (one that Leads) moved,
	// joined or left this pass. Noisy members come and go from night to
	// night; they are written in on the next such edit, not each time.
	left := map[int]bool{}
	for _, c := range all {
		if c.IssueNumber != 0 && c.State != store.ChangePointOpen && r.touched[c.ID] && Leads(c) {
			left[c.IssueNumber] = true
		}
	}
	for _, e := range events {
		e.cost = p.eventCost(ctx, e)
	}
	total := openTotal(events)
	var errs []error
	for _, e := range events {
		e.total = total
		for _, m := range e.members {
			e.touched = e.touched || Leads(m) && (r.touched[m.ID] || m.IssueNumber == 0)
		}
		e.touched = e.touched || left[e.issue]
		r.sum.Events++
		if err := p.tell(ctx, e, r.sum); err != nil {
			errs = append(errs, err)
		}
	}
	if err := p.retract(ctx, all, events, r.sum); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tell opens or updates the event's issue, posts its one Slack message,
// and calls the bisect hook with its leader.
func (p *Pass) tell(ctx context.Context, e *event, sum *Summary) error {
	var errs []error
	if p.o.Config.Issues == nil || *p.o.Config.Issues {
		opened, updated, err := p.issue(ctx, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("issue for change point %d: %w", e.leader().ID, err))
		}
		if opened {
			sum.IssuesOpened++
		}
		if updated {
			sum.IssuesUpdated++
		}
	}
	sent := false
	for _, m := range e.members {
		sent = sent || m.SlackSent
	}
	if url := p.slackURL(e.leader().Repo); url != "" && !sent {
		if err := p.post(ctx, url, p.slackText(e)); err != nil {
			errs = append(errs, fmt.Errorf("slack for change point %d: %w", e.leader().ID, err))
		} else {
			sum.SlackSent++
			sent = true
		}
	}
	// Every member carries the event's issue and whether it was told, so
	// a member that joins later is not told again.
	for i, m := range e.members {
		if m.IssueNumber == e.issue && m.IssueURL == e.url && m.SlackSent == sent {
			continue
		}
		m.IssueNumber, m.IssueURL, m.SlackSent = e.issue, e.url, sent
		stored, err := p.o.Store.PutChangePoint(ctx, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.members[i] = stored
	}
	if p.o.Regressed != nil && (e.issue != 0 || p.o.Config.Issues != nil && !*p.o.Config.Issues) {
		if err := p.o.Regressed(ctx, e.leader()); err != nil {
			errs = append(errs, fmt.Errorf("after change point %d: %w", e.leader().ID, err))
		}
	}
	return errors.Join(errs...)
}

// retract closes, once, each issue none of whose change points is still
// found: a comment says why, and Slack hears it when it heard the alert.
func (p *Pass) retract(ctx context.Context, all []store.ChangePointRecord, events []*event, sum *Summary) error {
	live := map[int]bool{}
	for _, e := range events {
		live[e.issue] = true
	}
	gone := map[int][]store.ChangePointRecord{}
	var order []int
	for _, c := range all {
		if c.IssueNumber == 0 || c.State != store.ChangePointGone {
			continue
		}
		if live[c.IssueNumber] {
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
		if c.IssueNumber != 0 && c.State == store.ChangePointOpen && c.Regression {
			delete(gone, c.IssueNumber)
		}
	}
	var errs []error
	for _, num := range order {
		recs := gone[num]
		if recs == nil {
			continue
		}
		if err := p.retractIssue(ctx, num, recs); err != nil {
			errs = append(errs, fmt.Errorf("retract issue #%d: %w", num, err))
			continue
		}
		sum.Retracted++
		if url := p.slackURL(recs[0].Repo); url != "" && anySlack(recs) {
			if err := p.post(ctx, url, p.retractText(num, recs)); err != nil {
				errs = append(errs, fmt.Errorf("slack retraction of issue #%d: %w", num, err))
			} else {
				sum.SlackSent++
			}
		}
		for _, c := range recs {
			c.State = store.ChangePointRetracted
			if _, err := p.o.Store.PutChangePoint(ctx, c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func anySlack(recs []store.ChangePointRecord) bool {
	for _, c := range recs {
		if c.SlackSent {
			return true
		}
	}
	return false
}
