package server

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target the server runs with unless
// GOGC says otherwise. A collection takes a quarter of the process's CPU
// for its mark phase — on a 2-CPU host one of the two — and makes the
// goroutine that allocates help, the webhook's answer among them. At Go's
// default of 100, 2,000 deliveries at 50/s answered at p99 98 ms, max
// 274 ms; at 400, p99 13 ms, max 48 ms, on the same loaded machine
// (docs/operations.md, Acknowledging webhooks). The price is a larger
// heap between collections: up to five times the live heap instead of
// two. GOMEMLIMIT caps it.
const GCPercent = 400

// TuneGC applies GCPercent unless GOGC is set, and returns the percent in
// force.
func TuneGC() int {
	if v := os.Getenv("GOGC"); v != "" {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
