package watch

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procRoot is where process status files live; tests point it elsewhere.
var procRoot = "/proc"

// RSS reads a process's resident set size in bytes from
// /proc/<pid>/status (VmRSS, in kB), the figure `ps` and the OOM killer
// use.
func RSS(pid int) (float64, error) {
	path := fmt.Sprintf("%s/%d/status", procRoot, pid)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read engine RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("read engine RSS: %s: unexpected VmRSS line %q", path, sc.Text())
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("read engine RSS: %s: %w", path, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read engine RSS: %s: %w", path, err)
	}
	return 0, fmt.Errorf("read engine RSS: %s has no VmRSS (a kernel thread, or the process exited)", path)
}
