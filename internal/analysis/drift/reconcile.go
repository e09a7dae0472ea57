package drift

import (
	"math"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/changepoint"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Series names one stored series: a repository's benchmark (the matrix
// cell, "nightly/c=1") and metric.
type Series struct {
	Repo, Key, Metric string
}

// Night is one night's point of a series: its value and the commit and
// job that measured it.
type Night struct {
	Date  time.Time
	Value float64
	SHA   string
	JobID int64
}

// ConfirmNights is how many nights a change point needs on each side
// before it is recorded: a step seen on the last night alone may be one
// slow night, so the next night confirms it (or it is never told).
const ConfirmNights = 2

// MaterialChange is how far a change point's estimate must move before
// its record — and so its issue — is rewritten: each new night nudges the
// means, and an issue edited for every nudge is noise.
const MaterialChange = 0.015

// matchDays is how far a change point may move between analyses (as new
// nights arrive) and still be the same one.
const matchDays = 3

// Outcome is what one analysis of a series decided against the records
// of earlier passes.
type Outcome struct {
	// Found counts the confirmed change points; New those no record held,
	// Updated those whose record moved or comes back from gone.
	Found, New, Updated int
	// Pending counts change points not yet confirmed by ConfirmNights on
	// each side: told no one, their records (if any) left as they are.
	Pending int
	// Put are the records to store, in order: new ones (ID 0), moved ones
	// and ones back from gone or retracted (their ID, issue and Slack
	// fields carried over; a retracted one's cleared, as it is told anew).
	Put []ChangePoint
	// Gone are the open records no change point matched, their State set
	// to Gone.
	Gone []ChangePoint
}

// Reconcile finds the change points of a series' nights (oldest first)
// with changepoint.Detect and matches each to the earlier record of the
// same step: the same direction, the nearest day within matchDays. A
// record is rewritten only when what its issue states changed (moved).
func Reconcile(s Series, nights []Night, existing []ChangePoint, opts changepoint.Options) Outcome {
	z := make([]float64, len(nights))
	for i, n := range nights {
		z[i] = n.Value
	}
	direction := config.HigherIsWorse
	if m, ok := config.SeriesMetric(s.Metric); ok {
		direction = m.Natural
	}
	var out Outcome
	used := map[int64]bool{}
	for _, cp := range changepoint.Detect(z, opts) {
		good, bad := nights[cp.Index-1], nights[cp.Index]
		rec := ChangePoint{Repo: s.Repo, Key: s.Key, Metric: s.Metric, State: Open,
			Day: bad.Date, GoodDay: good.Date, GoodSHA: good.SHA, BadSHA: bad.SHA, GoodJobID: good.JobID, BadJobID: bad.JobID,
			MeanBefore: cp.MeanBefore, MeanAfter: cp.MeanAfter, StdBefore: cp.StdBefore, StdAfter: cp.StdAfter,
			Change: cp.Change(), Magnitude: cp.Magnitude(), PValue: cp.PValue,
			Regression: direction.Sign()*cp.Change() > 0}
		prev, ok := match(existing, rec, used)
		if cp.NAfter < ConfirmNights || cp.NBefore < ConfirmNights {
			// Not confirmed yet: a record it may be (a step that moved
			// to the newest night) stays as it is.
			out.Pending++
			if ok {
				used[prev.ID] = true
			}
			continue
		}
		out.Found++
		changed := true
		if ok {
			used[prev.ID] = true
			changed = moved(prev, rec)
			rec.ID, rec.IssueNumber, rec.IssueURL, rec.SlackSent = prev.ID, prev.IssueNumber, prev.IssueURL, prev.SlackSent
			if changed || prev.State != Open {
				out.Updated++
			}
		} else {
			out.New++
		}
		if !ok || changed || prev.State != Open {
			if prev.State == Retracted {
				// Its issue was closed as retracted: the step is back, and
				// is told as a new one.
				rec.IssueNumber, rec.IssueURL, rec.SlackSent = 0, "", false
			}
			out.Put = append(out.Put, rec)
		}
	}
	for _, prev := range existing {
		if used[prev.ID] || prev.State != Open {
			continue
		}
		prev.State = Gone
		out.Gone = append(out.Gone, prev)
	}
	return out
}

// match finds the earlier record of the same change point: same series and
// direction, the nearest day within matchDays.
func match(existing []ChangePoint, rec ChangePoint, used map[int64]bool) (ChangePoint, bool) {
	var best ChangePoint
	bestGap := math.MaxFloat64
	for _, e := range existing {
		if used[e.ID] || e.Regression != rec.Regression {
			continue
		}
		gap := math.Abs(e.Day.Sub(rec.Day).Hours() / 24)
		if gap <= matchDays && gap < bestGap {
			best, bestGap = e, gap
		}
	}
	return best, bestGap <= matchDays
}

// moved reports whether what an issue states has changed: the commits, the
// day, or the change by MaterialChange or more.
func moved(a, b ChangePoint) bool {
	return a.GoodSHA != b.GoodSHA || a.BadSHA != b.BadSHA || math.Abs(a.Change-b.Change) >= MaterialChange || !a.Day.Equal(b.Day)
}
