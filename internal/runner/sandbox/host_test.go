package sandbox_test

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// TestReadProcLimits reads the hard limits from /proc/<pid>/limits files
// taken from real processes: this machine's dockerd (20000 open files) and
// one with no limit.
func TestReadProcLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file          string
		nofile, nproc uint64
	}{
		{"testdata/proc-limits-dockerd", 20000, 96367},
		{"testdata/proc-limits-unlimited", 0, 0},
	} {
		nofile, nproc, err := sandbox.ReadProcLimits(tc.file)
		if err != nil || nofile != tc.nofile || nproc != tc.nproc {
			t.Errorf("%s: nofile %d nproc %d (%v), want %d %d", tc.file, nofile, nproc, err, tc.nofile, tc.nproc)
		}
	}
	if _, _, err := sandbox.ReadProcLimits("testdata/no-such-file"); err == nil {
		t.Error("a missing file read as no limits")
	}
}

// TestPolicyFit: every limit defaults to what the host grants and an
// explicit one above it is lowered, with a line saying so; the defaults
// are kept where the host allows them.
func TestPolicyFit(t *testing.T) {
	t.Parallel()
	small := sandbox.Host{NoFile: 20000, NProc: 30000, CPUs: 2, MemoryBytes: 8 << 30, From: "dockerd"}
	big := sandbox.Host{NoFile: 1 << 20, NProc: 1 << 22, CPUs: 64, MemoryBytes: 1 << 40, From: "dockerd"}
	for _, tc := range []struct {
		name    string
		p       sandbox.Policy
		h       sandbox.Host
		want    sandbox.Policy
		lowered []string
	}{
		{"defaults on a host with a 20000 hard limit", sandbox.Policy{}, small,
			sandbox.Policy{NoFile: 20000, NProc: 30000, CPUs: "1", Memory: "6144m", ShmSize: "6144m", Scratch: "6144m"}, nil},
		{"defaults on a big host", sandbox.Policy{}, big,
			sandbox.Policy{NoFile: 65536, NProc: 65536, CPUs: "62", Memory: "786432m", ShmSize: "16g", Scratch: "16g"}, nil},
		{"defaults where nothing is known", sandbox.Policy{}, sandbox.Host{},
			sandbox.Policy{NoFile: 65536, NProc: 65536, CPUs: "1", Memory: "32g", ShmSize: "16g", Scratch: "16g"}, nil},
		{"asked above the host", sandbox.Policy{NoFile: 65536, NProc: 65536, CPUs: "8", Memory: "64g", ShmSize: "16g"}, small,
			sandbox.Policy{NoFile: 20000, NProc: 30000, CPUs: "2", Memory: "8192m", ShmSize: "8192m", Scratch: "8192m"},
			[]string{"open files 65536 lowered to 20000", "processes 65536 lowered to 30000", "CPUs 8 lowered to 2", "memory 64g lowered to 8192m", "/dev/shm 16g lowered"}},
		{"asked within the host", sandbox.Policy{NoFile: 4096, NProc: 1000, CPUs: "1.5", Memory: "1g", ShmSize: "512m", Scratch: "256m"}, small,
			sandbox.Policy{NoFile: 4096, NProc: 1000, CPUs: "1.5", Memory: "1g", ShmSize: "512m", Scratch: "256m"}, nil},
	} {
		got, lowered := tc.p.Fit(tc.h)
		for what, v := range map[string][2]any{
			"nofile": {got.NoFile, tc.want.NoFile}, "nproc": {got.NProc, tc.want.NProc}, "cpus": {got.CPUs, tc.want.CPUs},
			"memory": {got.Memory, tc.want.Memory}, "shm": {got.ShmSize, tc.want.ShmSize}, "scratch": {got.Scratch, tc.want.Scratch},
		} {
			if v[0] != v[1] {
				t.Errorf("%s: %s = %v, want %v", tc.name, what, v[0], v[1])
			}
		}
		if len(lowered) != len(tc.lowered) {
			t.Errorf("%s: lowered %q, want %d lines", tc.name, lowered, len(tc.lowered))
			continue
		}
		for i, w := range tc.lowered {
			if !strings.Contains(lowered[i], w) {
				t.Errorf("%s: lowered[%d] = %q, want %q", tc.name, i, lowered[i], w)
			}
		}
		if got.User != sandbox.DefaultUser || got.PidsLimit != sandbox.DefaultPidsLimit || got.LogMaxSize != sandbox.DefaultLogMaxSize || got.LogMaxFiles != sandbox.DefaultLogMaxFiles {
			t.Errorf("%s: other defaults not filled: %+v", tc.name, got)
		}
	}
}

// TestReadHost: on this host the limits found are at most this process's
// own (the daemon's can only lower them).
func TestReadHost(t *testing.T) {
	t.Parallel()
	h := sandbox.ReadHost()
	if h.CPUs < 1 || h.MemoryBytes <= 0 || !strings.HasPrefix(h.From, "the agent (getrlimit)") {
		t.Errorf("host %+v", h)
	}
	t.Logf("host limits: %+v", h)
}
