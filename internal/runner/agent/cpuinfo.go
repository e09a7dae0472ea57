package agent

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"sync"
)

// theHostCPU is read once: the processor does not change under a runner.
var theHostCPU = sync.OnceValue(readHostCPU)

// hostCPU is the processor the runner measures on: its model name (from
// /proc/cpuinfo), the cores this process may use, and cpu0's frequency
// governor — what a CPU engine's numbers depend on. Fields it cannot read
// stay empty.
type hostCPU struct {
	model, governor string
	cores           int
}

func readHostCPU() hostCPU {
	h := hostCPU{cores: runtime.GOMAXPROCS(0)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				h.model = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"); err == nil {
		h.governor = strings.TrimSpace(string(b))
	}
	return h
}
