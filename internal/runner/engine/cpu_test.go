package engine

import (
	"bufio"
	"context"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTreeCPU reads a process table fixture: an engine (bash → ollama
// serve, whose name holds ") " → its runner) beside a neighbour that
// burns more CPU than all of it.
func TestTreeCPU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		root int
		want time.Duration
		ok   bool
	}{
		{"the whole engine, reaped children included", 100, 16620 * time.Millisecond, true},
		{"a server and its runner", 101, 16090 * time.Millisecond, true},
		{"a leaf", 102, 12840 * time.Millisecond, true},
		{"an engine that is gone", 300, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TreeCPU("testdata/proc", tc.root)
			if got != tc.want || ok != tc.ok {
				t.Errorf("TreeCPU(%d) = %v, %v; want %v, %v", tc.root, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTreeCPUReal counts a real process tree on this host: a shell whose
// child burns CPU and is reaped before the shell prints, with bash's
// `times`, what its children used. The tree's CPU must include it.
func TestTreeCPUReal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", `bash -c 'for ((i=0;i<200000;i++)); do :; done'; times; read -r _`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	// `times` prints the shell's own times, then its reaped children's.
	sc := bufio.NewScanner(out)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		t.Fatalf("times printed %q", lines)
	}
	children := parseTimes(t, lines[1])
	got, ok := TreeCPU(procRoot, cmd.Process.Pid)
	if !ok {
		t.Fatalf("TreeCPU(%d): no such process", cmd.Process.Pid)
	}
	// Both are in ticks; times rounds to milliseconds.
	if children < 50*time.Millisecond || got < children-20*time.Millisecond {
		t.Errorf("tree CPU %v, the reaped child used %v: want at least the child's", got, children)
	}
	if _, ok := TreeCPU(procRoot, 1<<30); ok {
		t.Errorf("TreeCPU of a PID that does not exist said ok")
	}
}

// parseTimes reads one line of bash's `times`: "0m0.510s 0m0.003s".
func parseTimes(t *testing.T, line string) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, f := range strings.Fields(line) {
		d, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("times %q: %v", line, err)
		}
		sum += d
	}
	return sum
}
