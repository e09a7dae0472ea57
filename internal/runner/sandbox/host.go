package sandbox

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Host is what this host and its Docker daemon can grant an engine
// container. A ulimit above the daemon's own hard limit makes runc fail
// every start ("error setting rlimit type 7: operation not permitted"), a
// --cpus above the host's CPUs is refused by the daemon, and a memory
// limit above the host's memory bounds nothing.
type Host struct {
	// NoFile and NProc are the lowest hard limits of this process, the
	// Docker daemon and its containerd (where /proc shows them); 0 when
	// unknown (no limit applies).
	NoFile, NProc uint64
	CPUs          int   // CPUs this process may run on
	MemoryBytes   int64 // the host's memory; 0 when unknown
	// From says where the hard limits were read, for the log.
	From string
}

// ReadHost reads the limits of this host: getrlimit for this process, and
// /proc/<pid>/limits of dockerd and containerd when they are visible (not
// from inside a container, nor for a remote daemon).
func ReadHost() Host {
	h := Host{CPUs: runtime.NumCPU(), MemoryBytes: hostMemory(), From: "the agent (getrlimit)"}
	h.NoFile, h.NProc = selfLimits()
	for _, name := range []string{"dockerd", "containerd"} {
		pid := daemonPID(name)
		if pid == 0 {
			continue
		}
		p := filepath.Join("/proc", strconv.Itoa(pid), "limits")
		nofile, nproc, err := ReadProcLimits(p)
		if err != nil {
			continue
		}
		h.NoFile, h.NProc = lower(h.NoFile, nofile), lower(h.NProc, nproc)
		h.From += ", " + name + " (" + p + ")"
	}
	return h
}

// host is ReadHost, read once per process: the limits of a running
// daemon do not change under it.
var host = sync.OnceValue(ReadHost)

// CurrentHost is this host's limits, read on first use.
func CurrentHost() Host { return host() }

// lower is the smaller known limit; 0 is unknown.
func lower(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// ReadProcLimits reads the hard open-file and process limits from a
// /proc/<pid>/limits file; 0 stands for unlimited.
func ReadProcLimits(path string) (nofile, nproc uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read limits: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var name string
		switch {
		case strings.HasPrefix(line, "Max open files"):
			name = "Max open files"
		case strings.HasPrefix(line, "Max processes"):
			name = "Max processes"
		default:
			continue
		}
		// Soft, hard, units: the name has spaces, the values do not.
		f := strings.Fields(strings.TrimPrefix(line, name))
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("read limits %s: %q has no hard limit", path, line)
		}
		var v uint64
		if f[1] != "unlimited" {
			if v, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("read limits %s: %q: %w", path, line, err)
			}
		}
		if name == "Max open files" {
			nofile = v
		} else {
			nproc = v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read limits %s: %w", path, err)
	}
	return nofile, nproc, nil
}

// daemonPID finds a process by its command name: /var/run/docker.pid for
// dockerd first, then a scan of /proc; 0 when none is visible.
func daemonPID(name string) int {
	if name == "dockerd" {
		if b, err := os.ReadFile("/var/run/docker.pid"); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && commIs(pid, name) {
				return pid
			}
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && commIs(pid, name) {
			return pid
		}
	}
	return 0
}

func commIs(pid int, name string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return err == nil && strings.TrimSpace(string(b)) == name
}

// hostMemory is MemTotal from /proc/meminfo, in bytes; 0 when unknown.
func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 0
}

// ParseDockerBytes reads a docker size such as 512m, 16g, 1073741824 or
// 1.5g (b, k, m, g, t; the unit is 1024-based, as docker reads it).
func ParseDockerBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	mult := 1.0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]); i >= 0 {
			mult = math.Pow(1024, float64(i+1))
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || math.IsInf(v*mult, 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size such as 512m or 16g", s)
	}
	return int64(v * mult), nil
}
