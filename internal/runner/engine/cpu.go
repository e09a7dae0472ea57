package engine

import (
	"time"

	"github.com/perfgate/perfgate/internal/runner/proc"
)

// CPUTime is the CPU time the engine's processes have used so far: its
// root process (the command, or the container's init process) and every
// live descendant, user and system, including the children they reaped.
// The agent takes it before and after a measured run: on a CPU runner the
// engine's CPU time per output token is its own work, which a neighbour's
// load delays but barely changes, while every wall-clock latency carries
// the neighbour. false when the host has no /proc or the engine's PID is
// unknown (a container Docker did not name).
func (s *Server) CPUTime() (time.Duration, bool) {
	if s.enginePID <= 0 {
		return 0, false
	}
	return TreeCPU(procRoot, s.enginePID)
}

// procRoot is where the process table is read from.
const procRoot = "/proc"

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux ABI Go supports (the kernel exports it as a constant).
const clockTicks = 100

// TreeCPU sums utime, stime, cutime and cstime over root and its live
// descendants in the process table under proc. A process's reaped
// children's time is in its cutime, so a short-lived worker's CPU is not
// lost; a descendant that exited but is not reaped yet (a zombie) still
// holds its own.
func TreeCPU(root string, pid int) (time.Duration, bool) {
	procs := proc.All(root)
	if _, ok := procs[pid]; !ok {
		return 0, false
	}
	var ticks int64
	for _, p := range proc.Descendants(procs, pid, len(procs)) {
		ticks += procs[p].Ticks
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}
