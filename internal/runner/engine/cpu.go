package engine

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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
func TreeCPU(proc string, root int) (time.Duration, bool) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, false
	}
	type entry struct {
		ppid  int
		ticks int64
	}
	procs := map[int]entry{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(proc + "/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		st, err := parseStat(string(b))
		if err != nil {
			continue
		}
		procs[pid] = entry(st)
	}
	if _, ok := procs[root]; !ok {
		return 0, false
	}
	children := map[int][]int{}
	for pid, e := range procs {
		children[e.ppid] = append(children[e.ppid], pid)
	}
	var ticks int64
	seen := map[int]bool{}
	stack := []int{root}
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		ticks += procs[pid].ticks
		stack = append(stack, children[pid]...)
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// stat is what TreeCPU reads from one /proc/<pid>/stat line.
type stat struct {
	ppid  int
	ticks int64 // utime + stime + cutime + cstime
}

// parseStat reads "pid (comm) state ppid … utime stime cutime cstime …";
// comm may hold spaces and parentheses, so the fields count from its last
// ')'.
func parseStat(line string) (stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("proc stat %q: no ')'", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] state, f[1] ppid, … f[11] utime, f[12] stime, f[13] cutime, f[14] cstime.
	if len(f) < 15 {
		return stat{}, fmt.Errorf("proc stat: %d fields after the command, want at least 15", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, fmt.Errorf("proc stat ppid %q: %w", f[1], err)
	}
	var ticks int64
	for _, s := range f[11:15] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return stat{}, fmt.Errorf("proc stat time %q: %w", s, err)
		}
		ticks += t
	}
	return stat{ppid: ppid, ticks: ticks}, nil
}
