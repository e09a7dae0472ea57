package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// The scheduler scenario's repository config is valid and profiles a
// quick-tier regression.
func TestSchedulerConfigValid(t *testing.T) {
	c, err := config.Parse(config.DefaultPath, []byte(schedulerConfig("/usr/bin/perfgate")))
	if err != nil {
		t.Fatal(err)
	}
	if !c.ProfilesOnRegression("quick") {
		t.Error("the scheduler scenario does not profile a quick-tier regression")
	}
}

// TestSchedulerScenario runs `perfgate demo --scenario scheduler` end to
// end: PR #21 turns up the sim's prefill eagerness; the quick gate finds
// TPOT regressed; the profiling pass of base and head (engines from their
// own checkouts) says prefill interruptions of decode went up; after
// /perf rootcause on #21, PR #22 with the same change is recognised in its
// check run.
func TestSchedulerScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures three commits and profiles two on the simulated engine (about two minutes: arrivals at 10/s)")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	var log strings.Builder
	out, err := RunScheduler(ctx, Options{Dir: t.TempDir(), Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if c := out.First; c.Conclusion != "neutral" || !strings.Contains(c.Summary, "TPOT") || !strings.Contains(c.Summary, "❌ regression") {
		t.Errorf("PR #21: %s, want a regression warning on TPOT:\n%s", c.Conclusion, c.Summary)
	}
	for _, want := range []string{"Where the time went", "Prefill interruptions of decode went up by", "base perfgate-sim.", "head perfgate-sim."} {
		if !strings.Contains(out.Profile, want) {
			t.Errorf("the profile comment lacks %q:\n%s", want, out.Profile)
		}
	}
	if !strings.Contains(out.Recorded, "Recorded in the knowledge base") || !strings.Contains(out.Recorded, "prefill interruptions of decode went up") {
		t.Errorf("the root cause reply does not show the profile's finding:\n%s", out.Recorded)
	}
	if c := out.Second; !strings.Contains(c.Summary, "#21") || strings.Contains(c.Summary, "looks like") {
		t.Errorf("PR #22 repeats #21's change; its check run should name #21 as what its profile will decide:\n%s\n\n%s", c.Summary, log.String())
	}
	if p := out.SecondProfile; !strings.Contains(p, "looks like [#21]") || !strings.Contains(p, "scheduler eagerness turned up") || !strings.Contains(p, "profile similarity") {
		t.Errorf("PR #22's profile comment does not name the match on the profile:\n%s\n\n%s", p, log.String())
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", log.String())
	}
}

// TestSchedulerWorkloadIsNotClientBound: the scenario's load leaves a busy
// runner's client room — a closed loop, judged by idle slots, not paced
// arrivals judged by their lateness (a loaded 2-core machine woke the
// dispatcher 18–556 ms late, and the baseline was refused on every try) —
// while requests still finish at different steps, so there is prefill to
// insert into running decodes: answers of many lengths, and enough of them
// in flight.
func TestSchedulerWorkloadIsNotClientBound(t *testing.T) {
	t.Parallel()
	c, err := config.Parse(config.DefaultPath, []byte(schedulerConfig("/usr/bin/perfgate")))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workload
	if !w.RequestRate.IsInf() || w.MaxConcurrency < 8 {
		t.Errorf("request_rate %v, max_concurrency %d: want a closed loop of at least 8 in flight", w.RequestRate, w.MaxConcurrency)
	}
	if w.Dataset != "jsonl" || w.DatasetPath != schedulerPromptsPath || w.OutputLen != 0 {
		t.Fatalf("dataset %q at %q, output_len %d: want each prompt's own length from %s", w.Dataset, w.DatasetPath, w.OutputLen, schedulerPromptsPath)
	}
	lengths := map[int]int{}
	lines := strings.Split(strings.TrimSpace(schedulerPrompts()), "\n")
	for _, line := range lines {
		var v struct {
			Prompt    string `json:"prompt"`
			OutputLen int    `json:"output_len"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Prompt == "" || v.OutputLen <= 0 {
			t.Fatalf("prompt line %q: %v", line, err)
		}
		lengths[v.OutputLen]++
	}
	if len(lines) < 32 || len(lengths) < 16 {
		t.Errorf("%d prompts with %d distinct answer lengths: too few for requests to finish at different steps", len(lines), len(lengths))
	}
}
