//go:build unix

package sandbox

import "syscall"

// hardNoFile is this process's hard open-file limit; 0 when unknown.
func hardNoFile() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	return l.Max
}
