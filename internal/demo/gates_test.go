package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/stats"
	"github.com/perfgate/perfgate/internal/store"
)

// gatesConfig is the merge tier as the defaults have it (interleaved, 8
// pairs, regression past half the threshold, inconclusive needs an ack) on
// the demo's short workload: 100 prompts a run, so the p99 secondaries
// (which 100 requests cannot carry) are off.
func gatesConfig(perfgate string) string {
	return strings.Replace(repoConfig(perfgate), `tiers:
  quick:
    prompts: 100
    repeats: 3
    warmup: 16
`, `tiers:
  merge:
    prompts: 100
    warmup: 16
    secondary: {tpot_p99: off, ttft_p99: off, itl_p99: off, e2el_p99: off}
`, 1)
}

// TestGateRatesEndToEnd measures the merge tier end to end on the sim with
// its GPU-like noise: server, runners and engines started from each
// commit's checkout. Half the gates are A/A (the head only edits a README,
// so its engine is main's), half are +8% (the head's sim.yaml sets
// slowdown: 1.08); each arrives as a merge_group webhook and is judged
// from one interleaved job (8 ABBA pairs, more added once when
// inconclusive), its pairs shrunk toward the repository's earlier
// interleaved jobs. It reports how often each arm is called a regression,
// with Clopper–Pearson 95% intervals.
//
// A benchmark, not part of the suite: it runs only with
// PERFGATE_E2E_GATES=<gates per arm> (40 for the numbers; about a
// minute of runner time per gate, spread over PERFGATE_E2E_RUNNERS runners,
// 4 by default):
//
//	PERFGATE_E2E_GATES=40 go test -run TestGateRatesEndToEnd -v -timeout 3h ./internal/demo
func TestGateRatesEndToEnd(t *testing.T) {
	perArm, _ := strconv.Atoi(os.Getenv("PERFGATE_E2E_GATES"))
	if perArm <= 0 || testing.Short() {
		t.Skip("a benchmark: set PERFGATE_E2E_GATES=<gates per arm> to run it")
	}
	runners := 4
	if n, err := strconv.Atoi(os.Getenv("PERFGATE_E2E_RUNNERS")); err == nil && n > 0 {
		runners = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	h, err := Start(ctx, t.TempDir(), zerolog.Nop(), WithPerfgate(perfgateBin), func(c *startConfig) {
		c.config, c.agents = gatesConfig, runners
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	var gates []*rateGate
	for i := range perArm {
		aa, err := h.Repo.Branch(fmt.Sprintf("aa-%d", i), "docs only", map[string]string{
			"inference_engine/README.md": fmt.Sprintf("# inference_engine\n\nrevision %d of the docs\n", i)})
		if err != nil {
			t.Fatal(err)
		}
		slow, err := h.Repo.Branch(fmt.Sprintf("slow-%d", i), "an 8% slower engine", map[string]string{
			"inference_engine/sim.yaml": simKnobs(1.08) + fmt.Sprintf("# variant %d\n", i)})
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, &rateGate{arm: "A/A", sha: aa}, &rateGate{arm: "+8%", sha: slow})
	}
	gateRates(t, ctx, h, gates, []string{"A/A", "+8%"}, fmt.Sprintf("merge tier, interleaved (8 pairs, +8 once when inconclusive), %d runners", runners))
}

// rateGate is one gate of a rates benchmark: its arm, its head commit,
// and what its check ended as.
type rateGate struct {
	arm  string // "A/A" or the planted slowdown
	sha  string
	pr   int    // the pull request it is opened as (quick tier); 0: a merge_group (merge tier)
	seen string // its check's final state
	doc  gateDoc
}

// gateRates sends every gate as a merge_group webhook, or as a pull
// request opened when the gate names one (in a random order,
// so slow drift of the cards cannot favour one arm), waits for all to be
// judged, and logs per arm how often each was called a regression, with
// Clopper–Pearson 95% intervals.
func gateRates(t *testing.T, ctx context.Context, h *Harness, gates []*rateGate, armNames []string, title string) map[string]*rateTally {
	// Interleave the arms in a random order, so slow drift of the sim's
	// cards cannot favour one.
	rng := rand.New(rand.NewPCG(2026, 9))
	rng.Shuffle(len(gates), func(i, j int) { gates[i], gates[j] = gates[j], gates[i] })

	start := time.Now()
	for i, g := range gates {
		event, body, err := h.gateEvent(g)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := h.deliver(ctx, event, body, fmt.Sprintf("gate-delivery-%d", i)); err != nil || code/100 != 2 {
			t.Fatalf("deliver gate %d: %d %v", i, code, err)
		}
	}
	left := len(gates)
	for left > 0 {
		select {
		case <-ctx.Done():
			// Out of time: report the gates decided so far.
			t.Logf("%d gates still open after %v; reporting the %d decided", left, time.Since(start), len(gates)-left)
			decided := gates[:0:0]
			for _, g := range gates {
				if g.seen != "" {
					decided = append(decided, g)
				}
			}
			gates, left = decided, 0
			continue
		case <-time.After(5 * time.Second):
		}
		left = 0
		for _, g := range gates {
			if g.seen != "" {
				continue
			}
			cr, err := h.Store.GetCheckRun(ctx, repo, g.sha, g.tier())
			if err != nil || cr.State == store.CheckQueued || cr.State == store.CheckInProgress {
				left++
				continue
			}
			g.seen = cr.State
			if err := json.Unmarshal(cr.Verdict, &g.doc); err != nil {
				t.Fatalf("verdict of %s: %v", g.sha, err)
			}
		}
		t.Logf("%v: %d of %d gates decided", time.Since(start).Round(time.Second), len(gates)-left, len(gates))
	}
	elapsed := time.Since(start)
	for _, g := range gates {
		var ms []string
		for _, m := range g.doc.Report.Metrics {
			if !m.Secondary {
				ms = append(ms, fmt.Sprintf("%s %+.1f%% (worse bound %+.1f%%, pair sd %.1f%%) %s", m.Metric, 100*m.Estimate, 100*m.CIHigh, 100*m.PairSD, m.Verdict))
			}
		}
		t.Logf("%s %s: %s, %d pairs, %d history sessions; %s", g.arm, short(g.sha), g.seen, g.doc.Report.Pairs, g.doc.Report.HistorySessions, strings.Join(ms, "; "))
	}

	arms := map[string]*rateTally{}
	for _, name := range armNames {
		arms[name] = &rateTally{}
	}
	for _, g := range gates {
		a := arms[g.arm]
		a.n++
		a.pairs += g.doc.Report.Pairs
		if g.doc.Report.Pairs > 8 {
			a.extended++
		}
		switch g.seen {
		case store.CheckWarned, store.CheckEscalated:
			a.regression++
		case store.CheckPassed:
			a.pass++
		case store.CheckNeedsAck, store.CheckInconclusive:
			a.inconclusive++
		default:
			a.broken++
			t.Logf("gate %s (%s) ended %s: %v", short(g.sha), g.arm, g.seen, g.doc.Notes)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%s, %d gates in %v\n\n", title, len(gates), elapsed.Round(time.Second))
	fmt.Fprintf(&out, "| arm | gates | called a regression | 95%% Clopper–Pearson | passed | inconclusive (needs ack) | failed to run | pairs per gate | gates that added pairs |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, name := range armNames {
		a := arms[name]
		lo, hi := stats.ClopperPearson(a.regression, a.n, 0.95)
		fmt.Fprintf(&out, "| %s | %d | %d (%.1f%%) | %.1f%% – %.1f%% | %d | %d | %d | %.1f | %d |\n", name, a.n, a.regression,
			100*float64(a.regression)/float64(a.n), 100*lo, 100*hi, a.pass, a.inconclusive, a.broken, float64(a.pairs)/float64(a.n), a.extended)
	}
	t.Log("\n" + out.String())
	broken := 0
	for _, a := range arms {
		broken += a.broken
	}
	if broken > 0 {
		t.Errorf("%d gates failed to run", broken)
	}
	return arms
}

// tier is the check the gate is judged on.
func (g *rateGate) tier() string {
	if g.pr != 0 {
		return "quick"
	}
	return "merge"
}

// gateEvent is the webhook that starts gate g: a pull request opened from
// main to its head (quick tier), or a merge group whose queue ref names
// its pull request (GitHub: gh-readonly-queue/<base>/pr-<n>-<sha>; a group
// whose pull request cannot be told does not run: it may hold a fork's code).
func (h *Harness) gateEvent(g *rateGate) (event string, body []byte, err error) {
	if g.pr == 0 {
		body, err = h.mergeGroupEvent(g.sha, fmt.Sprintf("pr-%d-%s", slowPR, g.sha))
		return "merge_group", body, err
	}
	if err := h.setPR(g.pr, g.sha); err != nil {
		return "", nil, err
	}
	body, err = h.prEvent("opened", g.pr, g.sha)
	return "pull_request", body, err
}

// rateTally counts one arm's outcomes.
type rateTally struct{ n, regression, inconclusive, pass, broken, pairs, extended int }

// gateDoc is what the benchmark reads of a check's stored verdict.
type gateDoc struct {
	Report struct {
		Verdict         string `json:"verdict"`
		Pairs           int    `json:"pairs"`
		HistorySessions int    `json:"history_sessions"`
		Metrics         []struct {
			Metric    string  `json:"metric"`
			Estimate  float64 `json:"estimate"`
			CIHigh    float64 `json:"ci_high"`
			PairSD    float64 `json:"pair_sd"`
			Verdict   string  `json:"verdict"`
			Secondary bool    `json:"secondary"`
		} `json:"metrics"`
	} `json:"report"`
	Notes []string `json:"notes"`
}

// mergeGroupEvent is a merge_group checks_requested payload (GitHub's
// shape, from the fixture) whose merge group's head is sha on main.
func (h *Harness) mergeGroupEvent(sha, ref string) ([]byte, error) {
	raw, err := fixture("merge_group/checks_requested.json")
	if err != nil {
		return nil, err
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, err
	}
	mg, ok := ev["merge_group"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("merge_group fixture has no merge_group")
	}
	mg["head_sha"], mg["base_sha"], mg["head_ref"] = sha, h.Repo.Main, "refs/heads/gh-readonly-queue/main/"+ref
	if hc, ok := mg["head_commit"].(map[string]any); ok {
		hc["id"] = sha
	}
	return json.Marshal(ev)
}
