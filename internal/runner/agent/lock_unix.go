//go:build unix

package agent

import (
	"errors"
	"os"
	"syscall"
)

func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// unlockFile drops the lock before the file is closed. Closing alone is
// not enough: flock belongs to the open file description, which a child
// this process forks at that moment (an engine, git) shares until it
// execs, so the lock would outlive the agent that held it.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
