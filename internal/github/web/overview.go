package web

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// A repository's overview is what a team lead reads at a glance: the open
// regressions, each one step told once (the nightly pass's events), and
// one small chart per metric and matrix cell with its current value, its
// week-over-week change and its open regressions.

// Card is one metric of one benchmark on the overview.
type Card struct {
	Key, Tier, Cell, Metric, Unit string
	URL                           string
	Current                       float64
	// WoW is the median of the last 7 nights against the 7 before; nil
	// without both. Worse says whether that is the metric's bad direction.
	WoW         *float64
	Worse       bool
	Regressions int // open regression change points on the series
	// Spark is the sparkline: SVG polyline points in a 120×32 box, the
	// change points' x, and the last point.
	Spark        string
	SparkMarks   []float64
	LastX, LastY float64
}

// Event is one step on the default branch: the change points of one issue
// (the nightly pass groups them), or of nights close together.
type Event struct {
	Regression bool
	Since      time.Time
	Lead       store.ChangePointRecord
	Members    []store.ChangePointRecord
	Metrics    int
	Cells      int
	IssueURL   string
	Issue      int
	Good, Bad  string // the lead's commits
}

// sparkW and sparkH are the sparkline's box.
const sparkW, sparkH = 120.0, 32.0

// sparkWeeks is how far back the sparklines look.
const sparkWeeks = 8

// overview builds the cards of every series of repo — one query for the
// last sparkWeeks of all of them — and marks its open change points.
func (h *Handler) overview(ctx context.Context, repo string, series []store.SeriesInfo, open []store.ChangePointRecord) ([]*Card, error) {
	regs := map[string]int{}
	marks := map[string][]time.Time{}
	for _, c := range open {
		k := c.Key + "\x00" + c.Metric
		marks[k] = append(marks[k], c.Day)
		if c.Regression {
			regs[k]++
		}
	}
	var last time.Time
	for _, si := range series {
		if si.Last.After(last) {
			last = si.Last
		}
	}
	recent, err := h.st.RecentPoints(ctx, repo, last.AddDate(0, 0, -7*sparkWeeks))
	if err != nil {
		return nil, err
	}
	bySeries := map[string][]store.SeriesPoint{}
	for _, p := range recent {
		k := p.Key + "\x00" + p.Metric
		bySeries[k] = append(bySeries[k], store.SeriesPoint{Date: p.Date, Value: p.Value, JobID: p.JobID})
	}
	cards := make([]*Card, 0, len(series))
	for _, si := range series {
		k := si.Key + "\x00" + si.Metric
		pts := bySeries[k]
		if len(pts) == 0 {
			continue
		}
		tier, cell := splitKey(si.Key)
		c := &Card{Key: si.Key, Tier: tier, Cell: cell, Metric: si.Metric, URL: seriesPath(repo, si.Key, si.Metric, ""),
			Current: pts[len(pts)-1].Value, Regressions: regs[k]}
		dir := config.HigherIsWorse
		if m, ok := config.SeriesMetric(si.Metric); ok {
			c.Unit, dir = m.Unit, m.Natural
		}
		if wow, ok := weekOverWeek(pts); ok {
			c.WoW = &wow
			c.Worse = dir.Sign()*wow > 0
		}
		c.Spark, c.SparkMarks, c.LastX, c.LastY = sparkline(pts, marks[k])
		cards = append(cards, c)
	}
	return cards, nil
}

// weekOverWeek is the median of the points in the 7 days up to the last
// one against the median of the 7 days before.
func weekOverWeek(pts []store.SeriesPoint) (float64, bool) {
	last := pts[len(pts)-1].Date
	var this, prev []float64
	for _, p := range pts {
		age := last.Sub(p.Date)
		switch {
		case age < 7*24*time.Hour:
			this = append(this, p.Value)
		case age < 14*24*time.Hour:
			prev = append(prev, p.Value)
		}
	}
	if len(this) == 0 || len(prev) == 0 {
		return 0, false
	}
	sort.Float64s(this)
	sort.Float64s(prev)
	p := median(prev)
	if p == 0 {
		return 0, false
	}
	return median(this)/p - 1, true
}

// sparkline scales the series into the sparkline's box (values padded by
// a tenth of their range, so a flat line sits mid-box).
func sparkline(pts []store.SeriesPoint, marks []time.Time) (poly string, xs []float64, lastX, lastY float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
	}
	pad := (hi - lo) / 10
	if pad == 0 {
		pad = math.Max(math.Abs(hi)/10, 1)
	}
	lo, hi = lo-pad, hi+pad
	t0, t1 := pts[0].Date, pts[len(pts)-1].Date
	span := t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 {
		if span == 0 {
			return sparkW / 2
		}
		return 1 + (sparkW-2)*t.Sub(t0).Seconds()/span
	}
	y := func(v float64) float64 { return sparkH - 1 - (sparkH-2)*(v-lo)/(hi-lo) }
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x(p.Date), y(p.Value))
	}
	for _, m := range marks {
		if !m.Before(t0) && !m.After(t1) {
			xs = append(xs, math.Round(x(m)*10)/10)
		}
	}
	last := pts[len(pts)-1]
	return b.String(), xs, math.Round(x(last.Date)*10) / 10, math.Round(y(last.Value)*10) / 10
}

// events groups the open change points: by their issue (the nightly
// pass's events), the rest by nights close together; regressions first,
// newest first.
func events(open []store.ChangePointRecord) []*Event {
	byIssue := map[int]*Event{}
	var out []*Event
	var rest []store.ChangePointRecord
	for _, c := range open {
		if c.State != store.ChangePointOpen {
			continue
		}
		if c.IssueNumber == 0 || !c.Regression {
			rest = append(rest, c)
			continue
		}
		e := byIssue[c.IssueNumber]
		if e == nil {
			e = &Event{Regression: true, Issue: c.IssueNumber, IssueURL: c.IssueURL}
			byIssue[c.IssueNumber] = e
			out = append(out, e)
		}
		e.Members = append(e.Members, c)
	}
	sort.SliceStable(rest, func(i, j int) bool { return drift.Effect(rest[i]) > drift.Effect(rest[j]) })
	for _, c := range rest {
		var into *Event
		for _, e := range out {
			if e.Regression == c.Regression && near(e.Members, c) {
				into = e
				break
			}
		}
		if into == nil {
			into = &Event{Regression: c.Regression}
			out = append(out, into)
		}
		into.Members = append(into.Members, c)
	}
	for _, e := range out {
		sort.SliceStable(e.Members, func(i, j int) bool {
			li, lj := drift.Leads(e.Members[i]), drift.Leads(e.Members[j])
			if li != lj {
				return li
			}
			return drift.Effect(e.Members[i]) > drift.Effect(e.Members[j])
		})
		e.Lead = e.Members[0]
		e.Since, e.Good, e.Bad = e.Lead.Day, e.Lead.GoodSHA, e.Lead.BadSHA
		metrics, cells := map[string]bool{}, map[string]bool{}
		for _, m := range e.Members {
			metrics[m.Metric], cells[m.Key] = true, true
		}
		e.Metrics, e.Cells = len(metrics), len(cells)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Regression != out[j].Regression {
			return out[i].Regression
		}
		return out[i].Since.After(out[j].Since)
	})
	return out
}

// near: a member within 3 nights of c.
func near(ms []store.ChangePointRecord, c store.ChangePointRecord) bool {
	for _, m := range ms {
		if math.Abs(m.Day.Sub(c.Day).Hours()/24) <= 3 {
			return true
		}
	}
	return false
}

// githubCommit and githubPR link a commit and a pull request on GitHub.
func githubCommit(repo, sha string) string { return "https://github.com/" + repo + "/commit/" + sha }

func githubPR(repo string, n int) string {
	return fmt.Sprintf("https://github.com/%s/pull/%d", repo, n)
}

func githubCompare(repo, good, bad string) string {
	return "https://github.com/" + repo + "/compare/" + good + "..." + bad
}
