// Package jobstate is the vocabulary of a job's life that the queue (the
// store), the server and the runner share: the status a job is in and the
// kind of each run a runner uploads. It sits below all three, so the runner
// (internal/runner/agent) names a job's outcome without importing the database
// package.
package jobstate

// Status is a job's state.
type Status string

// Job states. queued → running → succeeded|failed|cancelled; a reaped lease
// sends running back to queued.
const (
	Queued    Status = "queued"
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Finished reports whether a runner may end a job in status s.
func (s Status) Finished() bool { return s == Succeeded || s == Failed || s == Cancelled }

// ResultKind tells warm-up from measured runs.
type ResultKind string

// Result kinds.
const (
	KindWarmup   ResultKind = "warmup"
	KindMeasured ResultKind = "measured"
)
