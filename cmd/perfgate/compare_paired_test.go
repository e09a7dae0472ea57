package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// `perfgate compare --paired` on an interleaved job's result files, as the
// agent writes them, gives the server's verdict document byte for byte:
// it pairs the runs and numbers their engine starts by the same MakePairs
// from the places in the files, and judges them with the same
// ComparePaired. 200 simulated jobs in the agent's shared-start order, half
// A/A and half 8% slower, with a start-to-start spread larger than the
// run-to-run one (where treating runs as independent raises false alarms).
func TestComparePairedIsTheServersDecision(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	tier, err := cfg.Tier("merge")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	jobs := 200
	if testing.Short() {
		jobs = 40
	}
	dir := t.TempDir()
	var alarmsCLI, alarmsServer, aa, differs int
	for j := range jobs {
		delta := 0.0
		if j%2 == 1 {
			delta = math.Log(1.08)
		} else {
			aa++
		}
		runs := gatetest.InterleavedJob(rng, int64(1000+j), 8, delta, gatetest.Noise{StartSD: 0.03, RunSD: 0.01})

		// The server's path: the runs as the store gives them.
		pairs, _, err := gate.MakePairs(runs)
		if err != nil {
			t.Fatal(err)
		}
		server, err := gate.ComparePaired(pairs, tier, gate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.MarshalIndent(server, "", "  ")
		if err != nil {
			t.Fatal(err)
		}

		// The CLI's path: the files, in whatever order they are named.
		args := []string{"--log-level", "error", "compare", "--paired", "--json", "--tier", "merge"}
		var bases, heads []string
		for i := len(runs) - 1; i >= 0; i-- {
			r := runs[i]
			data, err := json.Marshal(r.Result)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("job%d-run%d.json", j, r.Seq))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if r.Side == gate.SideBase {
				bases = append(bases, path)
			} else {
				heads = append(heads, path)
			}
		}
		args = append(append(append(args, "--baseline"), bases...), append([]string{"--candidate"}, heads...)...)
		var stdout, stderr bytes.Buffer
		code := mainArgs(args, &stdout, &stderr)
		if code != server.Verdict.ExitCode() {
			t.Fatalf("job %d: exit %d, the server's verdict %s\n%s", j, code, server.Verdict, stderr.String())
		}
		if got := bytes.TrimSpace(stdout.Bytes()); !bytes.Equal(got, want) {
			t.Fatalf("job %d: the CLI's document differs from the server's\n--- cli ---\n%s\n--- server ---\n%s", j, got, want)
		}
		if delta == 0 && server.Verdict == gate.Regression {
			alarmsServer++
		}
		if delta == 0 && code == gate.Regression.ExitCode() {
			alarmsCLI++
		}
		// The old path — pairs in file order, each run its own start —
		// is another decision: the test would see a CLI that took it.
		naive := make([]gate.Pair, len(pairs))
		for i, p := range pairs {
			naive[i] = gate.Pair{Session: "1", Index: i, Base: p.Base, Head: p.Head}
		}
		if other, err := gate.ComparePaired(naive, tier, gate.Options{}); err == nil {
			if b, _ := json.MarshalIndent(other, "", "  "); !bytes.Equal(b, want) {
				differs++
			}
		}
	}
	t.Logf("%d jobs, identical documents; first-look false alarms on %d A/A jobs: server %d, compare %d; the file-order path differs on %d jobs", jobs, aa, alarmsServer, alarmsCLI, differs)
	if differs == 0 {
		t.Error("the file-order pairing gave the server's documents too: this test cannot tell the paths apart")
	}
}
