package fleet

import "time"

// Aging bounds how long strict priority can hold background work back.
// With demand above capacity (quick screens alone can fill a fleet)
// nightly and bisect work would otherwise never run: a queued job of those
// classes that has waited AgeAfter(its class) is claimed after merge work
// but before any other job that has not waited its bound, the longest
// overdue first. Merge and quick work never age: merge is first already,
// and quick work waits on the fair share between tenants, which aging by
// age would turn into first come, first served.
var ageAfter = map[int]time.Duration{
	PriorityNightly: 4 * time.Hour,
	PriorityBatch:   6 * time.Hour,
}

// AgeAfter is how long a job of class priority waits before it goes ahead
// of the strict order; 0: never.
func AgeAfter(priority int) time.Duration { return ageAfter[priority] }
