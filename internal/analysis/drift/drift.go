// Package drift is the pure core of the nightly change-point pass over the
// default branch: which change points a series' nights hold and how they
// match the records of earlier passes (Reconcile), how the change points
// of one step group into one event (Events), what an event costs, and the
// words of its issue and its Slack message. It reads no store and calls
// no one; internal/github/drift loads the series and the records, stores
// what Reconcile decides, and opens, edits and closes the issues and posts
// the messages this package words.
package drift

import "time"

// ChangePoint is one change point of one series as the pass keeps it:
// where the level moved (the last good and first bad night, with their
// commits, which is where a bisect starts), by how much, and what perfgate
// told people about it. It has the fields of store.ChangePointRecord, in
// the same order, so the store's edge converts one to the other with a
// plain type conversion (which the compiler refuses the day they differ).
type ChangePoint struct {
	ID     int64
	Repo   string
	Key    string
	Metric string
	// Day is the date of the first night at the new level; GoodDay the
	// last night before it.
	Day, GoodDay         time.Time
	GoodSHA, BadSHA      string
	GoodJobID, BadJobID  int64
	MeanBefore           float64
	MeanAfter            float64
	StdBefore, StdAfter  float64
	Change               float64 // MeanAfter/MeanBefore − 1
	Magnitude            float64
	PValue               float64
	Regression           bool   // the change is in the metric's worse direction
	State                string // Open, Gone or Retracted
	IssueNumber          int
	IssueURL             string
	SlackSent            bool
	CreatedAt, UpdatedAt time.Time
}

// A change point's states (the store's, word for word): open while the
// latest analysis still finds it, gone when a later analysis no longer
// does (the series was re-measured), retracted when it is gone and its
// issue was closed saying so.
const (
	Open      = "open"
	Gone      = "gone"
	Retracted = "retracted"
)
