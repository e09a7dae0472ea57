package server

import (
	"os/exec"
	"syscall"
)

// parentDeathSignal ends the door with its server: a server killed
// outright (SIGKILL, a crash) leaves no door answering for it.
func parentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
