package engine

import (
	"syscall"

	"github.com/perfgate/perfgate/internal/runner/proc"
)

func procAttr() *syscall.SysProcAttr {
	// Its own process group, so Stop reaches the workers; and SIGKILL if
	// the agent dies, so a crashed agent does not leave the GPU busy.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

// groupAlive reports whether any live (non-zombie) process is in the group.
// A zombie holds no GPU memory, and where PID 1 does not reap orphans it
// would otherwise look alive forever.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	procs := proc.All("/proc")
	if procs == nil {
		return true
	}
	for pid, st := range procs {
		if st.PGRP == pgid && st.State != "Z" && pid > 0 {
			return true
		}
	}
	return false
}
