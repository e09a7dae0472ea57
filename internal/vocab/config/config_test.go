package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestInvalidConfigs pins the exact error of each invalid fixture: file,
// line, column, field, message and hint.
func TestInvalidConfigs(t *testing.T) {
	t.Parallel()
	cases := []struct{ file, want string }{
		{"unknown-top-key.yml", `unknown-top-key.yml:2:1: teirs: unknown key "teirs" (did you mean "tiers"?)`},
		{"unknown-tier-key.yml", `unknown-tier-key.yml:3:5: tiers.merge.repeat: unknown key "repeat" (did you mean "repeats"?)`},
		{"unknown-metric.yml", `unknown-metric.yml:4:18: tiers.merge.metrics.tpot_p999: unknown metric "tpot_p999" (did you mean "tpot_p99"?)`},
		{"percent-sign.yml", `percent-sign.yml:3:16: tiers.merge.threshold: want a percentage, got "0.05" (write it with a percent sign, e.g. 5% or -5%)`},
		{"throughput-sign.yml", `throughput-sign.yml:4:26: tiers.merge.metrics.output_throughput: sign says higher is worse but output_throughput is lower is worse (write it like -5%, or set direction: explicitly)`},
		{"bad-direction.yml", `bad-direction.yml:4:40: tiers.merge.metrics.ttft_p99.direction: unknown direction "up" (higher_is_worse or lower_is_worse)`},
		{"unpinned-image.yml", `unpinned-image.yml:2:10: server.image: image "vllm/vllm-openai:v0.6.3" is not pinned by digest (a tag can move under a stored baseline: write name@sha256:<64 hex digits>; docker buildx imagetools inspect prints the digest)`},
		{"image-and-command.yml", `image-and-command.yml:2:10: server.image: both image and command are set (keep one: the image, pinned by digest, or the command)`},
		{"bad-placeholder.yml", `bad-placeholder.yml:2:54: server.command[4]: unknown placeholder {{.Prot}} (did you mean {{.Port}}?)`},
		{"bad-duration.yml", `bad-duration.yml:1:17: escalate_after: invalid duration "two days" (write it like 48h, 90m or 2d)`},
		{"too-few-repeats.yml", `too-few-repeats.yml:3:14: tiers.quick.repeats: repeats 2 is too few (the median of runs and the run-to-run spread need at least 3 runs)`},
		{"p99-quick.yml", `p99-quick.yml:5:17: tiers.quick.metrics.ttft_p99: p99 of 100 requests rests on 1 request (gate a median or p90 here, or raise prompts to at least 1000)`},
		{"bad-dataset.yml", `bad-dataset.yml:2:12: workload.dataset: unknown value "sharegtp" (did you mean "sharegpt"?)`},
		{"jsonl-no-path.yml", `jsonl-no-path.yml:2:3: workload.dataset_path: dataset jsonl needs dataset_path (the prompts file, relative to the repository root)`},
		{"random-no-output-len.yml", `random-no-output-len.yml:3:15: workload.output_len: output_len 0 needs a dataset that gives each prompt its own length (set a positive output_len, or use dataset jsonl (each line's output_len) or sharegpt (each answer's length))`},
		{"dataset-outside.yml", `dataset-outside.yml:3:17: workload.dataset_path: "../secrets/prompts.jsonl" is outside the repository (give a path relative to the repository root)`},
		{"tier-removed.yml", `tier-removed.yml:2:12: tiers.nightly: tier "nightly" is required (remove the "off" or define the tier)`},
		{"bad-gpu-uuid.yml", `bad-gpu-uuid.yml:3:13: runner.gpu_uuid: "0" is not a GPU UUID (nvidia-smi -L prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)`},
		{"bad-forks.yml", `bad-forks.yml:2:10: triggers.forks: unknown value "maintainers" (did you mean "maintainer"?)`},
		{"forks-always.yml", `forks-always.yml:2:10: triggers.forks: "always" is no longer accepted: a fork's code runs on the GPU host only after someone approves the commit (use write (any writer may approve), maintainer (maintain or admin may) or never)`},
		{"wrong-type.yml", `wrong-type.yml:3:14: tiers.merge.prompts: want a whole number, got "lots"`},
		{"glob-double-star.yml", `glob-double-star.yml:2:5: paths[0]: bad glob "model/***": "**" must be a whole path segment, e.g. "model/**"`},
		{"bad-inconclusive.yml", `bad-inconclusive.yml:3:19: tiers.merge.inconclusive: unknown value "needs-ack" (did you mean "needs_ack"?)`},
		{"bad-regression-at.yml", `bad-regression-at.yml:3:20: tiers.quick.regression_at: unknown value "tau" (one of: threshold, half)`},
		{"bad-spending.yml", `bad-spending.yml:3:15: tiers.merge.spending: unknown value "fleming" (one of: pocock, obrien-fleming)`},
		{"bad-pairs.yml", `bad-pairs.yml:4:12: tiers.merge.pairs: pairs 2 out of range (3 to 64 base/head pairs per interleaved job; the merge default is 8)`},
		{"bad-session-noise.yml", `bad-session-noise.yml:3:20: tiers.merge.session_noise: session_noise 60% out of range (0% to 50%: the session-to-session shift of your runner, e.g. 2%)`},
		{"both-lists.yml", `both-lists.yml:6:17: tiers.merge.secondary.tpot_p90: tpot_p90 is both gated and secondary (keep it in one list)`},
		// Decoding and validation problems come in one report.
		{"one-pass.yml", "one-pass.yml:3:12: tiers.merge.pairs: pairs 2 out of range (3 to 64 base/head pairs per interleaved job; the merge default is 8)\n" +
			"one-pass.yml:4:14: tiers.merge.prompts: want a whole number, got \"lots\"\n" +
			"one-pass.yml:6:20: tiers.quick.session_noise: session_noise 60% out of range (0% to 50%: the session-to-session shift of your runner, e.g. 2%)\n" +
			"one-pass.yml:7:1: sever: unknown key \"sever\" (did you mean \"server\"?)"},
		{"cost-no-fleet.yml", `cost-no-fleet.yml:2:3: cost: no fleet size (set cost.gpus (GPUs serving all month) or cost.monthly_gpu_hours)`},
		{"cost-no-price.yml", `cost-no-price.yml:3:17: cost.gpu_hour_usd: no price of a GPU-hour (set cost.gpu_hour_usd in dollars, e.g. 4.10 for an A100-80G on demand; or remove cost: to show no money)`},
		{"cost-both-sizes.yml", `cost-both-sizes.yml:4:22: cost.monthly_gpu_hours: both gpus and monthly_gpu_hours are set (keep one: gpus (running all month) or monthly_gpu_hours)`},
		{"cost-dollar-sign.yml", `cost-dollar-sign.yml:2:17: cost.gpu_hour_usd: want a number, got "$4"`},
		{"yaml-syntax.yml", `yaml-syntax.yml:3:2: YAML syntax: did not find expected key (check the indentation and quoting on this line)`},
	}
	files, _ := filepath.Glob("../../../testdata/config/invalid/*.yml")
	if len(files) != len(cases) {
		t.Errorf("%d invalid fixtures but %d cases: every fixture needs its expected error", len(files), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../../../testdata/config/invalid", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(tc.file, data)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse = %v, %v; want a *ValidationError", c, err)
			}
			if got := ve.Error(); got != tc.want {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The documented example must describe the defaults: the README copies it.
func TestExampleIsTheDefaults(t *testing.T) {
	t.Parallel()
	got, err := Load("../../../testdata/config/perfgate.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	for name, tier := range want.Tiers {
		tier.Name = name
		want.Tiers[name] = tier
	}
	want.Server.Args = []string{"--max-model-len", "4096"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("example differs from Default():\n got %+v\nwant %+v", got, want)
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"", "# only a comment\n", "---\n"} {
		c, err := Parse("perfgate.yml", []byte(data))
		if err != nil {
			t.Fatalf("Parse(%q): %v", data, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("Parse(%q) is not Default()", data)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Default()
	quick, _ := c.Tier("quick")
	merge, _ := c.Tier("merge")
	if quick.Prompts != 100 || quick.Repeats != 3 || quick.Threshold != 0.15 || quick.Warmup >= merge.Warmup {
		t.Errorf("quick = %+v", quick)
	}
	if merge.Prompts != 1000 || merge.Repeats != 5 || merge.Threshold != 0.05 || merge.Warmup != 500 {
		t.Errorf("merge = %+v", merge)
	}
	for name := range quick.Metrics {
		if m, _ := LookupMetric(name); m.Percentile > 90 {
			t.Errorf("quick gates %s: a tail percentile of 100 requests is a handful of requests", name)
		}
	}
	if merge.Metrics["output_throughput"].Direction != LowerIsWorse || merge.Metrics["tpot_median"].Direction != HigherIsWorse {
		t.Errorf("directions: %+v", merge.Metrics)
	}
	// One gated metric per concern; the rest are shown, not gated.
	if len(quick.Metrics) != 3 || len(merge.Metrics) != 4 || merge.Secondary["tpot_p99"].Limit != 0.05 {
		t.Errorf("gated: quick %v merge %v; merge secondary %v", quick.GatedMetrics(), merge.GatedMetrics(), merge.SecondaryMetrics())
	}
	// Inconclusive never blocks by default: the merge tier settles it with
	// more pairs, then asks a human on a neutral check.
	if quick.Inconclusive != InconclusiveNeutral || merge.Inconclusive != InconclusiveNeutral || merge.SettleGPUMinutes != DefaultSettleGPUMinutes || quick.SettleGPUMinutes != 5 ||
		!merge.Interleave || merge.Pairs != 8 || quick.Interleave || merge.RegressionAt != RegressionAtHalf ||
		quick.RegressionAt != RegressionAtThreshold || merge.SessionNoise != 0.02 {
		t.Errorf("policy: quick %+v merge %+v", quick, merge)
	}
	if c.EscalateAfter.D() != 48*time.Hour || c.Runner.Labels[0] != "gpu" || c.Triggers.MergeLabel != "perf/merge-gate" {
		t.Errorf("defaults: %+v", c)
	}
	if _, err := c.Tier("weekly"); err == nil {
		t.Error("unknown tier: want an error")
	}
}

// Listed metrics override or add to the defaults; "off" removes one; an
// image replaces the default command; custom tiers start from merge.
func TestOverrides(t *testing.T) {
	t.Parallel()
	src := `
server:
  image: vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
tiers:
  merge:
    metrics:
      tpot_p99: 3%
      ttft_p90: off
      request_throughput: {direction: lower_is_worse}
      itl_p95: {limit: 7%}
    secondary:
      error_rate: 2%
    inconclusive: neutral
    interleave: false
    pairs: 12
    regression_at: threshold
    session_noise: 1%
  soak:
    prompts: 5000
escalate_after: 2d
`
	c, err := Parse("x.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	merge := c.Tiers["merge"]
	m := merge.Metrics
	if m["tpot_p99"].Limit != 0.03 || m["tpot_median"].Limit != 0.05 {
		t.Errorf("override: %+v", m)
	}
	if _, ok := m["ttft_p90"]; ok {
		t.Error("off did not remove ttft_p90")
	}
	// Listing a default secondary metric under metrics gates it, and the
	// other way round.
	if _, ok := merge.Secondary["tpot_p99"]; ok {
		t.Error("tpot_p99 gated by the file but still secondary")
	}
	if _, ok := m["error_rate"]; ok || merge.Secondary["error_rate"].Limit != 0.02 {
		t.Errorf("error_rate demoted by the file: gated %v secondary %+v", m["error_rate"], merge.Secondary["error_rate"])
	}
	if m["request_throughput"] != (Threshold{0.05, LowerIsWorse}) {
		t.Errorf("direction-only threshold takes the tier's limit: %+v", m["request_throughput"])
	}
	if m["itl_p95"] != (Threshold{0.07, HigherIsWorse}) {
		t.Errorf("limit-only threshold takes the metric's direction: %+v", m["itl_p95"])
	}
	if merge.Inconclusive != InconclusiveNeutral || merge.Interleave || merge.Pairs != 12 ||
		merge.RegressionAt != RegressionAtThreshold || merge.SessionNoise != 0.01 {
		t.Errorf("policy keys: %+v", merge)
	}
	if len(c.Server.Command) != 0 {
		t.Errorf("image set: default command should go, got %v", c.Server.Command)
	}
	if s := c.Tiers["soak"]; s.Prompts != 5000 || s.Repeats != 5 || s.Name != "soak" || s.Inconclusive != InconclusiveNeutral {
		t.Errorf("custom tier: %+v", s)
	}
	if d := Default().Tiers["merge"]; d.Metrics["tpot_median"].Limit != 0.05 || d.Secondary["tpot_p90"].Limit != 0.05 || d.Secondary["tpot_p99"].Limit != 0.05 || d.Metrics["error_rate"].Limit != 0.01 {
		t.Error("decoding changed the defaults")
	}
	if c.EscalateAfter.D() != 48*time.Hour {
		t.Errorf("2d = %v", c.EscalateAfter)
	}
}

func TestAllErrorsReported(t *testing.T) {
	t.Parallel()
	_, err := Parse("x.yml", []byte("paths: []\nrunner:\n  labels: []\ntriggers:\n  drafts: maybe\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
}

func TestLookupMetric(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, key string
		dir       Direction
		ok        bool
	}{
		{"ttft_p99", "p99_ttft_ms", HigherIsWorse, true},
		{"tpot_median", "median_tpot_ms", HigherIsWorse, true},
		{"itl_p99.9", "p99.9_itl_ms", HigherIsWorse, true},
		{"e2el_mean", "mean_e2el_ms", HigherIsWorse, true},
		{"output_throughput", "output_throughput", LowerIsWorse, true},
		{"gpu_mem_used", "gpu_mem_used_mib", HigherIsWorse, true},
		{"gpu_power", "gpu_power_w", HigherIsWorse, true},
		{"ttft_p100", "", "", false},
		{"latency", "", "", false},
	}
	for _, tc := range cases {
		m, ok := LookupMetric(tc.name)
		if ok != tc.ok || m.Key != tc.key || m.Natural != tc.dir {
			t.Errorf("LookupMetric(%q) = %+v, %v", tc.name, m, ok)
		}
	}
}

func TestMatches(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Paths = []string{"model/**", "inference_engine/**", "docs/*.md", "**/kernels/*.cu"}
	cases := []struct {
		files []string
		want  bool
	}{
		{[]string{"model/llama.py"}, true},
		{[]string{"model/a/b/c.py"}, true},
		{[]string{"inference_engine/sched.py"}, true},
		{[]string{"modelx/a.py"}, false},
		{[]string{"README.md", "docs/x.md"}, true},
		{[]string{"docs/sub/x.md"}, false},
		{[]string{"a/b/kernels/gemm.cu"}, true},
		{[]string{"kernels/gemm.cu"}, true},
		{[]string{"src/model/a.py"}, false},
		{nil, false},
	}
	for _, tc := range cases {
		if got := c.Matches(tc.files); got != tc.want {
			t.Errorf("Matches(%v) = %v", tc.files, got)
		}
	}
}

// TestEnginePlaceholders: the placeholders the runner fills are accepted
// in the command, args and build templates alike; others are refused with
// a suggestion.
func TestEnginePlaceholders(t *testing.T) {
	t.Parallel()
	ok := `server:
  image: vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  model: m
  args: ["--config", "{{.Workdir}}/engine.yaml", "--tag", "{{.JobID}}-{{.SHA}}", "--weights", "{{.Models}}/m"]
  build:
    command: [docker, build, --build-arg, "BASE={{.Image}}", -t, "perfgate-engine:{{.SHA}}", .]
    image: "perfgate-engine:{{.SHA}}"
    timeout: 20m
`
	c, err := Parse("ok.yml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Build.Image != "perfgate-engine:{{.SHA}}" || len(c.Server.Build.Command) != 7 || c.Server.Build.Timeout.D() != 20*time.Minute {
		t.Errorf("build = %+v", c.Server.Build)
	}
	cmd := `server: {command: [run, "--dir={{.Workdir}}", "--job={{.JobID}}", "--port={{.Port}}"], model: m}
`
	if _, err := Parse("cmd.yml", []byte(cmd)); err != nil {
		t.Errorf("command with {{.Workdir}} and {{.JobID}}: %v", err)
	}
	bad := `server: {command: [run, "{{.Workdri}}"], model: m, build: {command: [make, "{{.Sha}}"]}}
`
	_, err = Parse("bad.yml", []byte(bad))
	for _, want := range []string{"server.command[1]: unknown placeholder {{.Workdri}} (did you mean {{.Workdir}}?)", "server.build.command[1]: unknown placeholder {{.Sha}}"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// output_len 0 keeps each prompt's own answer length, which only a
// dataset that has one can give.
func TestOutputLenFromTheDataset(t *testing.T) {
	c, err := Parse(DefaultPath, []byte("workload:\n  dataset: jsonl\n  dataset_path: prompts.jsonl\n  output_len: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Workload.OutputLen != 0 {
		t.Errorf("output_len = %d, want 0 (each line's own)", c.Workload.OutputLen)
	}
}
