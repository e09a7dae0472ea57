package sandbox

import "syscall"

// rlimitNProc is Linux's RLIMIT_NPROC, which package syscall does not name.
const rlimitNProc = 6

// rlimInfinity is RLIM_INFINITY as getrlimit returns it.
const rlimInfinity = ^uint64(0)

// selfLimits are this process's hard open-file and process limits; 0
// when unknown or unlimited.
func selfLimits() (nofile, nproc uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Max != rlimInfinity {
		nofile = l.Max
	}
	if syscall.Getrlimit(rlimitNProc, &l) == nil && l.Max != rlimInfinity {
		nproc = l.Max
	}
	return nofile, nproc
}
