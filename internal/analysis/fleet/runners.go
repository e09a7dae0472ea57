package fleet

import "time"

// OnlineWindow is how recently a runner must have called in to count as
// online: an idle runner's long poll returns every 30 s, a busy one
// heartbeats every 30 s.
const OnlineWindow = 2 * time.Minute

// Runner states, as `perfgate runners` shows them.
const (
	StateIdle     = "idle"
	StateBusy     = "busy"
	StateDraining = "draining" // drained, finishing its job
	StateDrained  = "drained"
	StateOffline  = "offline"
)

// RunnerState names what a runner is doing: offline when it has not
// called in within OnlineWindow, else busy or idle — draining or drained
// once drained.
func RunnerState(drained, busy bool, lastSeen, now time.Time) string {
	switch {
	case now.Sub(lastSeen) > OnlineWindow:
		return StateOffline
	case drained && busy:
		return StateDraining
	case drained:
		return StateDrained
	case busy:
		return StateBusy
	}
	return StateIdle
}
