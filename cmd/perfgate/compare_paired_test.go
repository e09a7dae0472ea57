package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// `perfgate compare --paired` on an interleaved job's result files, as the
// agent writes them, gives the server's decision byte for byte: both build
// a judge.Input — the server's from the runs as its store lists them, the
// CLI's from the files in whatever order they are named — and call the
// one judge.Judge, which pairs the runs, numbers their engine starts and
// decides. The documents and the notes must be equal. 200 simulated jobs in the agent's shared-start order, half
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

		// The server's path: the runs as the store lists them (job by
		// job, in run order), with the job as the settle budget counts it.
		il := judge.Sided(runs)
		decision := judge.Judge(judge.Input{Tier: tier, Key: tier.Name, Interleaved: &il,
			Settle: judge.Settle{Jobs: []judge.JobTime{{Runs: len(runs), Interleaved: true}}}})
		server := decision.Report
		if server == nil {
			t.Fatalf("job %d: the server's judgement %s has no document: %v", j, decision.Outcome, decision.Reasons)
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
		for _, n := range decision.Notes {
			if !strings.Contains(stderr.String(), "note: "+n+"\n") {
				t.Fatalf("job %d: the server's note %q is not among the CLI's:\n%s", j, n, stderr.String())
			}
		}
		if delta == 0 && server.Verdict == gate.Regression {
			alarmsServer++
		}
		if delta == 0 && code == gate.Regression.ExitCode() {
			alarmsCLI++
		}
		// The old path — pairs in file order, each run its own start —
		// is another decision: the test would see a CLI that took it.
		pairs, _, err := gate.MakePairs(runs)
		if err != nil {
			t.Fatal(err)
		}
		naive := make([]gate.Pair, len(pairs))
		for i, p := range pairs {
			naive[i] = gate.Pair{Session: "1", Index: i, Base: p.Base, Head: p.Head}
		}
		if other := judge.Judge(judge.Input{Tier: tier, Key: tier.Name, Interleaved: &judge.Interleaved{Pairs: naive}}); other.Report != nil {
			if b, _ := json.MarshalIndent(other.Report, "", "  "); !bytes.Equal(b, want) {
				differs++
			}
		}
	}
	t.Logf("%d jobs, identical documents; first-look false alarms on %d A/A jobs: server %d, compare %d; the file-order path differs on %d jobs", jobs, aa, alarmsServer, alarmsCLI, differs)
	if differs == 0 {
		t.Error("the file-order pairing gave the server's documents too: this test cannot tell the paths apart")
	}
}
