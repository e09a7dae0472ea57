package report

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/gate/gatetest"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/report")

var deadline = time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)

// caseView is a gate case's document as the dispatcher hands it over.
func caseView(t *testing.T, name string, v View) View {
	t.Helper()
	c, err := gatetest.Named(name)
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict == "" {
		v.Verdict = VerdictOf(c.Report.Verdict)
	}
	return FromGate(v, c.Report, &result.Environment{GPUName: "NVIDIA H100 80GB HBM3", GPUUUID: "GPU-5f2c", Driver: "550.54.15", CUDA: "12.4", EngineImage: "vllm/vllm-openai@sha256:3c1f"})
}

func regressionRows(t *testing.T) []Row {
	return caseView(t, "regression", View{}).Rows
}

func TestGolden(t *testing.T) {
	t.Parallel()
	warn := View{Tier: "merge", Verdict: Warning, SHA: "4f1c9e2ab7", Author: "octocat", Deadline: deadline, EscalateAfter: 48 * time.Hour}
	tests := []struct {
		name string
		view View
	}{
		{"pass", caseView(t, "pass", View{SHA: "4f1c9e2ab7"})},
		{"improvement", caseView(t, "improvement", View{SHA: "4f1c9e2ab7"})},
		{"last_look", caseView(t, "last_look", View{SHA: "4f1c9e2ab7"})},
		{"warning", func() View {
			v := caseView(t, "regression", warn)
			v.Excluded = []string{"run 3: GPU thermal slowdown in 4% of samples"}
			v.RunDetail = "| run | TPOT median |\n|--:|--:|\n| 1 | 20.87 ms |"
			return v
		}()},
		{"escalated", caseView(t, "regression", View{Verdict: Escalated, SHA: "4f1c9e2ab7", Author: "octocat", EscalateAfter: 48 * time.Hour})},
		{"inconclusive_more_runs", caseView(t, "inconclusive_more_runs", View{SHA: "4f1c9e2ab7"})},
		{"inconclusive_last_look", caseView(t, "inconclusive_last_look", View{SHA: "4f1c9e2ab7", NeedsAck: true})},
		{"inconclusive_env", caseView(t, "environment", View{SHA: "4f1c9e2ab7"})},
		{"too_few_runs", caseView(t, "too_few_runs", View{SHA: "4f1c9e2ab7"})},
		{"warning_cost", func() View {
			v := caseView(t, "regression", warn)
			v.Cost = costOf(cost.Price{GPUHourUSD: 4.10, GPUs: 10}, cost.Change{Metric: "tpot_median", Estimate: 0.186, Regressed: true})
			return v
		}()},
		{"escalated_unpriced", func() View {
			v := caseView(t, "regression", View{Verdict: Escalated, SHA: "4f1c9e2ab7", Author: "octocat", EscalateAfter: 48 * time.Hour})
			v.Cost = costOf(cost.Price{GPUHourUSD: 4.10, MonthlyGPUHours: 2000}, cost.Change{Metric: "ttft_p90", Estimate: 0.156, Regressed: true})
			return v
		}()},
		{"capacity_warning", caseView(t, "capacity", warn)},
		{"capacity_cannot_tell", caseView(t, "capacity_cannot_tell", View{SHA: "4f1c9e2ab7"})},
		{"capacity_recorded", caseView(t, "capacity_recorded", View{SHA: "4f1c9e2ab7"})},
		{"soak_warning", caseView(t, "soak_leak", warn)},
		{"soak_pass", caseView(t, "soak_clean", View{SHA: "4f1c9e2ab7"})},
		{"skipped", View{Tier: "quick", Verdict: Skipped, SHA: "4f1c9e2ab7"}},
		{"broken", View{Tier: "quick", Verdict: Broken, SHA: "4f1c9e2ab7",
			Problems: []string{".github/perfgate.yml:7:5: tiers.merge.metrics.tpot_p98: unknown metric (did you mean tpot_p99?)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := RenderCheck(tt.view)
			if err != nil {
				t.Fatal(err)
			}
			got := "# " + c.Title + "\n\n" + c.Summary + "\n\n---- text ----\n" + c.Text
			if tt.view.Verdict == Warning || tt.view.Verdict == Escalated {
				comment, err := RenderComment(tt.view)
				if err != nil {
					t.Fatal(err)
				}
				got += "\n---- comment ----\n" + comment
			}
			golden(t, filepath.Join("..", "..", "..", "testdata", "report", tt.name+".md"), got)
		})
	}
}

func costOf(p cost.Price, changes ...cost.Change) *cost.Estimate {
	e := cost.Of(p, changes)
	return &e
}

// A price is shown on regression verdicts only: a pass, an inconclusive
// or a broken check costs nothing.
func TestCostOnlyOnRegressions(t *testing.T) {
	t.Parallel()
	e := costOf(cost.Price{GPUHourUSD: 4, GPUs: 10}, cost.Change{Metric: "output_throughput", Estimate: -0.1, Regressed: true})
	for _, v := range []Verdict{Pass, Warning, Escalated, Accepted, Inconclusive, Skipped, Broken} {
		c, err := RenderCheck(View{Tier: "merge", Verdict: v, SHA: "4f1c9e2ab7", Rows: regressionRows(t), Cost: e})
		if err != nil {
			t.Fatal(err)
		}
		want := v == Warning || v == Escalated || v == Accepted
		if got := strings.Contains(c.Summary, "**Cost:** output throughput −10.0%"); got != want {
			t.Errorf("%s: cost shown %v, want %v\n%s", v, got, want, c.Summary)
		}
	}
	c, err := RenderCheck(View{Tier: "merge", Verdict: Warning, SHA: "4f1c9e2ab7", Rows: regressionRows(t)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Summary, "Cost") {
		t.Errorf("no price declared, yet the summary speaks of cost:\n%s", c.Summary)
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run `go test ./internal/analysis/report -update` to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendering; diff it or run with -update after checking.\n--- got ---\n%s", path, got)
	}
}

func TestTableIsAligned(t *testing.T) {
	t.Parallel()
	rows := table(regressionRows(t))
	var lines []string
	for _, r := range rows {
		lines = append(lines, "| "+strings.Join(r.Cells, " | ")+" |")
	}
	w := utf8.RuneCountInString(lines[0])
	for _, l := range lines {
		if utf8.RuneCountInString(l) != w {
			t.Errorf("line %q has width %d, header %d", l, utf8.RuneCountInString(l), w)
		}
	}
	if !strings.HasSuffix(rows[1].Cells[1], ":") || !strings.HasPrefix(rows[1].Cells[0], ":") {
		t.Errorf("numbers right-aligned, names left-aligned: %v", rows[1].Cells)
	}
}

func TestHugeOutputStaysUnderGitHubLimitsAndKeepsTheTable(t *testing.T) {
	t.Parallel()
	v := View{Tier: "nightly", Verdict: Warning, SHA: "abc1234", Rows: regressionRows(t), Deadline: deadline}
	for i := 0; i < 5000; i++ {
		v.Notes = append(v.Notes, strings.Repeat("note ", 10))
		v.Environment = append(v.Environment, KV{"k", strings.Repeat("v", 40)})
		v.Excluded = append(v.Excluded, strings.Repeat("excluded run ", 5))
	}
	v.Log = strings.Repeat("log line of the runner\n", 10000)
	v.RunDetail = strings.Repeat("| 1 | 2 |\n", 10000)
	c, err := RenderCheck(v)
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(c.Summary); n > MaxCheckField {
		t.Errorf("summary has %d characters, limit %d", n, MaxCheckField)
	}
	if n := utf8.RuneCountInString(c.Text); n > MaxCheckField {
		t.Errorf("text has %d characters, limit %d", n, MaxCheckField)
	}
	if !strings.Contains(c.Summary, "| TPOT median") {
		t.Errorf("the regression table was dropped from the summary")
	}
	if strings.Contains(c.Summary, "note note") {
		t.Errorf("notes should go before the table does")
	}
}

func TestGoldenFromGate(t *testing.T) {
	t.Parallel()
	base, err := gate.LoadRuns(filepath.Join("..", "..", "..", "testdata", "gate", "vllm-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cand []*result.Result
	for _, n := range []string{"1", "2", "3"} {
		r, err := result.LoadFile(filepath.Join("..", "..", "..", "testdata", "gate", "vllm-candidate-"+n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		cand = append(cand, r)
	}
	tier, err := config.Default().Tier("quick")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gate.Compare(base, cand, tier, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := FromGate(View{Verdict: VerdictOf(rep.Verdict), SHA: "4f1c9e2ab7"}, rep, &result.Environment{GPUName: "NVIDIA A100-SXM4-80GB", Driver: "550.54.15", CUDA: "12.4"})
	if len(v.Rows) != len(tier.GatedMetrics()) {
		t.Errorf("table has %d rows, the tier gates %d metrics", len(v.Rows), len(tier.GatedMetrics()))
	}
	c, err := RenderCheck(v)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("..", "..", "..", "testdata", "report", "from_gate.md"), "verdict: "+string(rep.Verdict)+"\n\n"+c.Summary)
}

func TestDisplayName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"tpot_p99":                   "TPOT p99",
		"output_throughput":          "output throughput",
		"gpu_mem_used":               "GPU mem used",
		"c=16 tpot_p99":              "c=16 · TPOT p99",
		"rate=inf,in=128 error_rate": "rate=inf,in=128 · error rate",
	} {
		if got := gate.DisplayName(in); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEnvironmentSandbox: the environment says how the engine was
// contained, and loudly when it was not.
func TestEnvironmentSandbox(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sandbox, want string
	}{
		{"container", "container: read-only checkout"},
		{"uncontained", "**none**: the runner allows uncontained engines"},
		{"", ""},
	} {
		kv := environment(result.Environment{Commit: "4f1c9e2", SourceTree: "sha256:ab12", Sandbox: tt.sandbox})
		got := ""
		for _, e := range kv {
			if e.Key == "sandbox" {
				got = e.Value
			}
		}
		if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
			t.Errorf("sandbox %q shows %q, want prefix %q", tt.sandbox, got, tt.want)
		}
		if len(kv) < 2 || kv[1].Key != "source tree" {
			t.Errorf("sandbox %q: environment %+v lacks the source tree after the commit", tt.sandbox, kv)
		}
	}
}

// A pass states what the equivalence test proved, per gated metric, in the
// details: "no regression larger than 15% (upper bound …)"; each row
// carries its own noise band and interval, and the summary no second band
// that could disagree with them.
func TestPassStatesEquivalence(t *testing.T) {
	t.Parallel()
	var base []*result.Result
	for i := range 5 {
		f := 1 + 0.01*float64(i-2)
		base = append(base, &result.Result{OutputThroughput: 1700 / f, Completed: 100,
			Metrics: map[string]float64{"median_itl_ms": 11 * f, "p90_ttft_ms": 280 * f}})
	}
	tier, err := config.Default().Tier("quick")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gate.Compare(base, base, tier, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != gate.Pass {
		t.Fatalf("the baseline against itself: %s", rep.Verdict)
	}
	v := FromGate(View{Verdict: Pass, SHA: "4f1c9e2ab7"}, rep, nil)
	c, err := RenderCheck(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| no regression larger than 15% (upper bound +", "| no drop larger than 15% (lower bound −",
		"interval |", "| noise |", "| decided by "} {
		if !strings.Contains(c.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, c.Summary)
		}
	}
	if strings.Contains(c.Summary, "**noise band:**") {
		t.Errorf("a summary-wide noise band:\n%s", c.Summary)
	}
}

// The engine's identity drops Go build-cache and `go run` paths: they
// change with every build and hide the program's name.
func TestEngineIdentity(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/root/.cache/go-build/3f/3f2a9c-d/ollama serve":     "ollama serve",
		"/tmp/go-build2718281/b001/exe/ollama serve --x 1":   "ollama serve --x 1",
		"vllm/vllm-openai@sha256:abab":                       "vllm/vllm-openai@sha256:abab",
		"python -m sglang.launch_server --model /models/opt": "python -m sglang.launch_server --model /models/opt",
	} {
		if got := engineIdentity(in); got != want {
			t.Errorf("engineIdentity(%q) = %q, want %q", in, got, want)
		}
	}
}

// What an estimate rests on is on the check: the unit once, and per
// metric what was left out, with the rule's breakdown.
func TestEstimatorNotes(t *testing.T) {
	t.Parallel()
	var base, head []*result.Result
	for i := range 8 {
		f := 1 + 0.002*float64(i%3-1)
		base = append(base, &result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": 11}})
		head = append(head, &result.Result{Completed: 100, Metrics: map[string]float64{"median_tpot_ms": 11 * f}})
	}
	head[4].Metrics["median_tpot_ms"] *= 1.15
	var pairs []gate.Pair
	for i := range base {
		pairs = append(pairs, gate.Pair{Session: "1", Index: i, Base: base[i], Head: head[i]})
	}
	tier := config.Tier{Name: "merge", Confidence: 0.995, NoiseSigmas: 3, Metrics: map[string]config.Threshold{"tpot_median": {Limit: 0.05, Direction: config.HigherIsWorse}}}
	rep, err := gate.ComparePaired(pairs, tier, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(FromGate(View{}, rep, nil).Notes, "\n")
	for _, want := range []string{"estimate: paired t on 7 pair ratios", "TPOT median: outlier pair 4 of job 1 left out", "at most 1 pair in 8"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// A PR author's first screen — the comment above its details fold — fits in
// 15 lines and speaks no statistics: no α, no looks, no budget. The
// maintainer's numbers are one click away, inside the fold.
func TestAuthorsFirstScreen(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"regression", "inconclusive_more_runs"} {
		v := caseView(t, name, View{Tier: "merge", Verdict: Warning, SHA: "4f1c9e2ab7", Author: "octocat", Deadline: deadline, EscalateAfter: 48 * time.Hour})
		comment, err := RenderComment(v)
		if err != nil {
			t.Fatal(err)
		}
		first, details, ok := strings.Cut(comment, "<details>")
		if !ok {
			t.Fatalf("%s: no details fold:\n%s", name, comment)
		}
		if n := strings.Count(strings.TrimSpace(first), "\n") + 1; n > 15 {
			t.Errorf("%s: the first screen has %d lines:\n%s", name, n, first)
		}
		for _, word := range []string{"α", "look ", "budget", "Holm", "noise band:"} {
			if strings.Contains(first, word) {
				t.Errorf("%s: the first screen says %q:\n%s", name, word, first)
			}
		}
		for _, want := range []string{"look 1 of 4", "| decided by", "**Policy:**"} {
			if !strings.Contains(details, want) {
				t.Errorf("%s: the details lack %q:\n%s", name, want, details)
			}
		}
	}
}

// A run on a runner without a real card never reads as if it had one: the
// scripted card's model, driver and CUDA version stay off the check, and
// the processor the engine ran on is named instead.
func TestCPURunnerEnvironment(t *testing.T) {
	t.Parallel()
	env := &result.Environment{GPUName: "NVIDIA H100 80GB HBM3 (fake)", GPUUUID: "GPU-5f2c", Driver: "550.54.15", CUDA: "12.4", FakeGPU: true,
		CPUModel: "Intel(R) Xeon(R) Platinum 8481C", CPUCores: 2, CPUGovernor: "performance", EngineImage: "ollama serve"}
	cs, err := gatetest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if len(c.Report.Mismatches) > 0 {
			continue // its mismatch table quotes the GPU runs it was made from
		}
		v := FromGate(View{Verdict: VerdictOf(c.Report.Verdict), SHA: "4f1c9e2ab7", Author: "octocat", Deadline: deadline}, c.Report, env)
		check, err := RenderCheck(v)
		if err != nil {
			t.Fatal(err)
		}
		comment, err := RenderComment(v)
		if err != nil {
			t.Fatal(err)
		}
		all := check.Title + check.Summary + check.Text + comment
		for _, word := range []string{"H100", "CUDA", "550.54", "GPU-minutes"} {
			if strings.Contains(all, word) {
				t.Errorf("%s: a CPU run's check says %q", c.Name, word)
			}
		}
		if !strings.Contains(check.Summary, "| CPU | Intel(R) Xeon(R) Platinum 8481C · 2 cores · governor performance |") {
			t.Errorf("%s: the check does not name the CPU:\n%s", c.Name, check.Summary)
		}
	}
}

// The check names the engine as the engine named itself, and shows what
// the engine ran with: a knob the pull request set that the engine did not
// act on is called out with the engine's own line, and an effective value
// that moved is a row of base against head.
func TestEngineSettingsOnTheCheck(t *testing.T) {
	t.Parallel()
	cs, err := gatetest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	env := &result.Environment{EngineName: "ollama", EngineVersion: "v0.9.6", EngineImage: "bash /w/inference_engine/serve.sh 40123", CPUModel: "Xeon", CPUCores: 2}
	warned := result.Setting{Name: "type_k", Value: "f16", Source: "log", Evidence: "llama_kv_cache_unified: kv_size = 4096, type_k = 'f16', type_v = 'f16'",
		Knobs: []string{"OLLAMA_KV_CACHE_TYPE"}, Unsupported: "quantized kv cache requested but flash attention disabled (type=q8_0)"}
	ctx := func(v string) result.Setting {
		return result.Setting{Name: "n_ctx_per_seq", Value: v, Source: "log", Evidence: "llama_context: n_ctx_per_seq = " + v, Knobs: []string{"num_ctx"}}
	}
	base := &result.EngineSettings{Values: []result.Setting{{Name: "type_k", Value: "f16", Source: "log", Knobs: []string{"OLLAMA_KV_CACHE_TYPE"}}, ctx("1024")}}
	head := &result.EngineSettings{Values: []result.Setting{warned, ctx("2048")}, Changes: []result.KnobChange{
		{Knob: "OLLAMA_KV_CACHE_TYPE", File: "inference_engine/ollama.env", Line: 5, Text: "OLLAMA_KV_CACHE_TYPE=q8_0"},
		{Knob: "num_ctx", File: "model/Modelfile", Line: 5, Text: "PARAMETER num_ctx 2048"},
	}}
	v := FromGate(View{Verdict: VerdictOf(cs[0].Report.Verdict), SHA: "4f1c9e2ab7", Deadline: deadline}, cs[0].Report, env)
	v = WithSettings(v, result.DiffSettings(base, head))
	check, err := RenderCheck(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| engine version | ollama v0.9.6 |",
		"### What the engine ran with",
		"> ⚠️ this change had no effect on the engine: `OLLAMA_KV_CACHE_TYPE=q8_0` (inference_engine/ollama.env:5) — the engine ran with type_k = `f16` and warned: `quantized kv cache requested but flash attention disabled (type=q8_0)`",
		"`PARAMETER num_ctx 2048` (model/Modelfile:5) took effect: n_ctx_per_seq `1024` → `2048`",
		"| n_ctx_per_seq | `1024` | `2048` | log |",
	} {
		if !strings.Contains(check.Summary, want) {
			t.Errorf("the check lacks %q:\n%s", want, check.Summary)
		}
	}
	anns := Annotations(result.DiffSettings(base, head), cs[0].Report)
	if len(anns) != 2 || anns[0].Level != "warning" || anns[0].Path != "inference_engine/ollama.env" || anns[0].Line != 5 ||
		anns[1].Level != "notice" || anns[1].Path != "model/Modelfile" || !strings.Contains(anns[1].Message, "; measured for the whole change: ") {
		t.Errorf("annotations %+v: want a warning on ollama.env:5 and a notice on Modelfile:5 with the measured change", anns)
	}
	// No diff, no section.
	plain, err := RenderCheck(WithSettings(FromGate(View{Verdict: VerdictOf(cs[0].Report.Verdict)}, cs[0].Report, env), nil))
	if err != nil || strings.Contains(plain.Summary, "What the engine ran with") {
		t.Errorf("a check without a settings diff shows the section (err %v):\n%s", err, plain.Summary)
	}
}
