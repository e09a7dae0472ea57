// Package proc reads Linux's process table: one parser for
// /proc/<pid>/stat, and the tree of a process's descendants. The engine's
// CPU time, its process group's liveness, the GPU's foreign-process check
// and the engine's binaries are all read through it.
package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what perfgate reads of one /proc/<pid>/stat line.
type Stat struct {
	PID, PPID, PGRP int
	State           string // "R", "S", "Z", …
	// Ticks is utime + stime + cutime + cstime, in clock ticks.
	Ticks int64
}

// ParseStat reads "pid (comm) state ppid pgrp … utime stime cutime cstime
// …". The command name may hold spaces and parentheses, so the fields
// count from its last ')'.
func ParseStat(line string) (Stat, error) {
	i, j := strings.LastIndexByte(line, ')'), strings.IndexByte(line, '(')
	if i < 0 || j < 0 || j > i {
		return Stat{}, fmt.Errorf("proc stat %q: no (command)", line)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:j]))
	if err != nil {
		return Stat{}, fmt.Errorf("proc stat pid %q: %w", line[:j], err)
	}
	f := strings.Fields(line[i+1:])
	// f[0] state, f[1] ppid, f[2] pgrp, … f[11] utime, f[12] stime, f[13] cutime, f[14] cstime.
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("proc stat: %d fields after the command, want at least 15", len(f))
	}
	st := Stat{PID: pid, State: f[0]}
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("proc stat ppid %q: %w", f[1], err)
	}
	if st.PGRP, err = strconv.Atoi(f[2]); err != nil {
		return Stat{}, fmt.Errorf("proc stat pgrp %q: %w", f[2], err)
	}
	for _, s := range f[11:15] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("proc stat time %q: %w", s, err)
		}
		st.Ticks += t
	}
	return st, nil
}

// Read reads one process's stat under root ("/proc", or a test's copy).
func Read(root string, pid int) (Stat, error) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("%s/%d/stat: %w", root, pid, err)
	}
	st.PID = pid
	return st, nil
}

// All reads every process under root that can be read; one that ended
// while being read is left out.
func All(root string) map[int]Stat {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	out := map[int]Stat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := Read(root, pid); err == nil {
			out[pid] = st
		}
	}
	return out
}

// Descendants lists root and every process below it in procs, root first,
// at most limit of them.
func Descendants(procs map[int]Stat, root, limit int) []int {
	children := map[int][]int{}
	for pid, st := range procs {
		children[st.PPID] = append(children[st.PPID], pid)
	}
	out := []int{root}
	for i := 0; i < len(out) && len(out) < limit; i++ {
		out = append(out, children[out[i]]...)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
