package gpu

import (
	"sync"

	"github.com/perfgate/perfgate/internal/runner/proc"
)

// AllowPIDs allows exactly the given PIDs on the GPU.
func AllowPIDs(pids ...int) func(uint32) bool {
	set := map[uint32]bool{}
	for _, p := range pids {
		set[uint32(p)] = true
	}
	return func(pid uint32) bool { return set[pid] }
}

// AllowDescendants allows root and every process below it in the process
// tree: an engine's workers, or, with root the host PID of a container's
// init process, everything in the container. It reads /proc, so the agent
// must see the host's PID namespace (NVML reports host PIDs). Answers are
// cached: a PID that was the engine's stays the engine's for the run.
func AllowDescendants(root int) func(uint32) bool {
	var mu sync.Mutex
	seen := map[uint32]bool{}
	return func(pid uint32) bool {
		mu.Lock()
		defer mu.Unlock()
		if ok, hit := seen[pid]; hit {
			return ok
		}
		ok := root > 0 && descends(int(pid), root)
		seen[pid] = ok
		return ok
	}
}

// AnyOf allows a PID that any of the rules allows.
func AnyOf(rules ...func(uint32) bool) func(uint32) bool {
	return func(pid uint32) bool {
		for _, r := range rules {
			if r != nil && r(pid) {
				return true
			}
		}
		return false
	}
}

func descends(pid, root int) bool {
	for depth := 0; depth < 128 && pid > 1; depth++ {
		if pid == root {
			return true
		}
		ppid, err := parentPID(pid)
		if err != nil {
			return false
		}
		pid = ppid
	}
	return pid == root
}

// parentPID reads a process's parent from /proc.
func parentPID(pid int) (int, error) {
	st, err := proc.Read("/proc", pid)
	return st.PPID, err
}
