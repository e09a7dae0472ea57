//go:build unix && !linux

package engine

import "syscall"

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) != syscall.ESRCH }
