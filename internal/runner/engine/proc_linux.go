package engine

import (
	"os"
	"strconv"
	"strings"
	"syscall"
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
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the command name: state, ppid, pgrp.
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && pid > 0 {
			return true
		}
	}
	return false
}
