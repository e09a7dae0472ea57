package proc

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want Stat
		ok   bool
	}{
		{"42 (ollama) S 7 42 42 0 -1 4194560 100 0 0 0 150 50 3 2 20 0 5 0 100 0 0", Stat{PID: 42, PPID: 7, PGRP: 42, State: "S", Ticks: 205}, true},
		// A command name with spaces and a parenthesis.
		{"9 (a (b) c) Z 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 0 0", Stat{PID: 9, PPID: 1, PGRP: 9, State: "Z", Ticks: 2}, true},
		{"9 (x) S 1", Stat{}, false},
		{"no parenthesis", Stat{}, false},
		{"", Stat{}, false},
		{"12 (short) S 1 2 3", Stat{}, false},
		{"12 (bad ppid) S x 1 1 0 -1 0 0 0 0 0 1 1 0 0 20", Stat{}, false},
		{"12 (bad time) S 1 1 1 0 -1 0 0 0 0 0 1 y 0 0 20", Stat{}, false},
		{"9 x) S 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 0 0", Stat{}, false},
	} {
		got, err := ParseStat(tc.line)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v (ok %v)", tc.line, got, err, tc.want, tc.ok)
		}
	}
}

// A fake /proc: 1 → 10 → {11, 12}, 12 → 13; 20 is another tree.
func TestDescendants(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for pid, ppid := range map[int]int{1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 20: 1} {
		dir := filepath.Join(root, itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := itoa(pid) + " (p) S " + itoa(ppid) + " " + itoa(pid) + " 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 0 0"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := Descendants(All(root), 10, 100)
	sort.Ints(got[1:])
	if want := []int{10, 11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("descendants of 10: %v, want %v", got, want)
	}
	if got := Descendants(All(root), 10, 2); len(got) != 2 {
		t.Errorf("limit 2: %v", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
