package config

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"
)

// finish resolves choices that depend on what the file set: an image
// replaces the default command.
func (d *decoder) finish(c *Config) {
	c.Capacity.On, c.Soak.On = d.set["capacity"], d.set["soak"]
	if d.set["server.image"] && !d.set["server.command"] && c.Server.Image != "" {
		c.Server.Command = nil
	}
	for name, t := range c.Tiers {
		t.Name = name
		d.moveListedMetrics("tiers."+name, t)
		for _, m := range []map[string]Threshold{t.Metrics, t.Secondary} {
			for k, th := range m {
				if th.Limit == 0 {
					th.Limit = float64(t.Threshold)
				}
				if th.Direction == "" {
					if info, ok := LookupMetric(k); ok {
						th.Direction = info.Natural
					}
				}
				m[k] = th
			}
		}
		c.Tiers[name] = t
	}
}

var (
	pinnedImage = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
	gpuUUID     = regexp.MustCompile(`^(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	placeholder = regexp.MustCompile(`can't evaluate field (\w+)`)
)

// requiredTiers must exist: the app dispatches them by name.
var requiredTiers = []string{"quick", "merge", "nightly"}

// minTailRequests is how many requests must lie beyond a gated percentile
// for it to be a statistic rather than one request.
const minTailRequests = 10

func (d *decoder) validate(c *Config) {
	if len(c.Paths) == 0 {
		d.errField("paths", "no paths: no PR would ever be gated", `list globs such as "model/**"`)
	}
	for i, p := range c.Paths {
		f := fmt.Sprintf("paths[%d]", i)
		if strings.HasPrefix(strings.TrimPrefix(p, "!"), "/") {
			d.errField(f, fmt.Sprintf("glob %q is absolute", p), "paths are relative to the repository root: drop the leading /")
		} else if err := checkGlob(p); err != nil {
			d.errField(f, fmt.Sprintf("bad glob %q: %v", p, err), "")
		}
	}
	if problem, hint := checkPaths(c.Paths); problem != "" {
		d.errField("paths", problem, hint)
	}
	d.validateServer(&c.Server)
	d.validateWorkload(&c.Workload)

	for _, name := range requiredTiers {
		if _, ok := c.Tiers[name]; !ok {
			d.errField("tiers."+name, fmt.Sprintf("tier %q is required", name), "remove the \"off\" or define the tier")
		}
	}
	names := make([]string, 0, len(c.Tiers))
	for n := range c.Tiers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.validateTier("tiers."+n, c.Tiers[n])
	}

	r := c.Runner
	if len(r.Labels) == 0 {
		d.errField("runner.labels", "no runner labels", "list at least one, e.g. [gpu]")
	}
	for i, l := range r.Labels {
		if strings.TrimSpace(l) == "" {
			d.errField(fmt.Sprintf("runner.labels[%d]", i), "empty label", "")
		}
	}
	if r.GPUUUID != "" && !gpuUUID.MatchString(r.GPUUUID) {
		d.errField("runner.gpu_uuid", fmt.Sprintf("%q is not a GPU UUID", r.GPUUUID), "nvidia-smi -L prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
	}

	t := c.Triggers
	if t.MergeLabel == "" {
		d.errField("triggers.merge_label", "empty merge label", `e.g. "perf/merge-gate"`)
	}
	if t.Forks == "always" {
		d.errField("triggers.forks", `"always" is no longer accepted: a fork's code runs on the GPU host only after someone approves the commit`,
			"use write (any writer may approve), maintainer (maintain or admin may) or never")
	} else {
		d.oneOf("triggers.forks", t.Forks, []string{ForksNever, ForksMaintainer, ForksWrite})
	}
	d.oneOf("triggers.drafts", t.Drafts, []string{"skip", "run"})
	d.validateProfile(c)
	d.validateCost(c.Cost)
	d.validateLongRun(c)
}

func (d *decoder) oneOf(field, got string, valid []string) bool {
	for _, v := range valid {
		if got == v {
			return true
		}
	}
	d.errField(field, fmt.Sprintf("unknown value %q", got), orList(didYouMean(got, valid), "one of: "+strings.Join(valid, ", ")))
	return false
}

func (d *decoder) validateServer(s *Server) {
	switch {
	case s.Image != "" && len(s.Command) > 0:
		d.errField("server.image", "both image and command are set", "keep one: the image, pinned by digest, or the command")
	case s.Image == "" && len(s.Command) == 0:
		d.errField("server", "no image and no command", "set server.image (name@sha256:…) or server.command")
	}
	if s.Image != "" && !pinnedImage.MatchString(s.Image) {
		d.errField("server.image", fmt.Sprintf("image %q is not pinned by digest", s.Image),
			"a tag can move under a stored baseline: write name@sha256:<64 hex digits>; docker buildx imagetools inspect prints the digest")
	}
	for i, arg := range s.Command {
		d.checkTemplate(fmt.Sprintf("server.command[%d]", i), arg)
	}
	for i, arg := range s.Args {
		d.checkTemplate(fmt.Sprintf("server.args[%d]", i), arg)
	}
	for i, arg := range s.Build.Command {
		d.checkTemplate(fmt.Sprintf("server.build.command[%d]", i), arg)
	}
	if s.Build.Image != "" {
		d.checkTemplate("server.build.image", s.Build.Image)
		if len(s.Build.Command) == 0 {
			d.errField("server.build.image", "a build image without a build command", "set server.build.command, e.g. [docker, build, -t, \"perfgate-engine:{{.SHA}}\", .]")
		}
	}
	if s.Build.Timeout < 0 {
		d.errField("server.build.timeout", "negative timeout", "e.g. 30m")
	}
	if s.Model == "" {
		d.errField("server.model", "no model", "the model the engine serves, e.g. meta-llama/Llama-3.1-8B-Instruct")
	}
	if !strings.HasPrefix(s.ReadinessURL, "/") && !strings.HasPrefix(s.ReadinessURL, "http://") && !strings.HasPrefix(s.ReadinessURL, "https://") {
		d.errField("server.readiness_url", fmt.Sprintf("readiness URL %q is neither a path nor a URL", s.ReadinessURL), "e.g. /health")
	}
	if s.Port < 1 || s.Port > 65535 {
		d.errField("server.port", fmt.Sprintf("port %d out of range", s.Port), "1-65535")
	}
}

// checkTemplate reports a server command template that does not parse or
// names a placeholder the runner does not fill.
func (d *decoder) checkTemplate(f, arg string) {
	d.checkTemplateOf(f, arg, Placeholders, struct {
		Port                                           int
		Model, GPU, JobID, Workdir, SHA, Models, Image string
	}{})
}

// checkTemplateOf reports a template that does not parse or names a
// placeholder outside names; sample has exactly those fields.
func (d *decoder) checkTemplateOf(f, arg string, names []string, sample any) {
	hint := "placeholders are {{." + strings.Join(names, "}}, {{.") + "}}"
	tmpl, err := template.New(f).Option("missingkey=error").Parse(arg)
	if err != nil {
		d.errField(f, fmt.Sprintf("bad template %q", arg), hint)
		return
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, sample)
	if err == nil {
		return
	}
	if m := placeholder.FindStringSubmatch(err.Error()); m != nil {
		if s := didYouMean(m[1], names); s != "" {
			hint = strings.Replace(s, `"`+suggestTarget(s)+`"`, "{{."+suggestTarget(s)+"}}", 1)
		}
		d.errField(f, fmt.Sprintf("unknown placeholder {{.%s}}", m[1]), hint)
		return
	}
	d.errField(f, fmt.Sprintf("bad template %q: %v", arg, err), hint)
}

// suggestTarget pulls x out of `did you mean "x"?`.
func suggestTarget(s string) string {
	i, j := strings.IndexByte(s, '"'), strings.LastIndexByte(s, '"')
	if i < 0 || j <= i {
		return ""
	}
	return s[i+1 : j]
}

func (d *decoder) validateWorkload(w *Workload) {
	if d.oneOf("workload.dataset", w.Dataset, []string{"random", "sharegpt", "jsonl"}) && w.Dataset == "jsonl" && w.DatasetPath == "" {
		d.errField("workload.dataset_path", "dataset jsonl needs dataset_path", "the prompts file, relative to the repository root")
	}
	if p := w.DatasetPath; p != "" {
		clean := path.Clean(p)
		if path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") {
			d.errField("workload.dataset_path", fmt.Sprintf("%q is outside the repository", p), "give a path relative to the repository root")
		}
	}
	if w.InputLen <= 0 {
		d.errField("workload.input_len", fmt.Sprintf("input_len %d must be positive", w.InputLen), "")
	}
	switch {
	case w.OutputLen < 0:
		d.errField("workload.output_len", fmt.Sprintf("output_len %d must not be negative", w.OutputLen), "")
	case w.OutputLen == 0 && w.Dataset == "random":
		d.errField("workload.output_len", "output_len 0 needs a dataset that gives each prompt its own length", "set a positive output_len, or use dataset jsonl (each line's output_len) or sharegpt (each answer's length)")
	}
	if w.MaxConcurrency < 0 {
		d.errField("workload.max_concurrency", "max_concurrency must not be negative", "0 means unlimited")
	}
	if !strings.HasPrefix(w.Endpoint, "/") {
		d.errField("workload.endpoint", fmt.Sprintf("endpoint %q is not a path", w.Endpoint), "e.g. /v1/completions")
	}
	d.validateTraffic(w)
}

func (d *decoder) validateTier(f string, t Tier) {
	if t.Prompts <= 0 {
		d.errField(f+".prompts", fmt.Sprintf("prompts %d must be positive", t.Prompts), "")
	}
	if t.Repeats < 3 {
		d.errField(f+".repeats", fmt.Sprintf("repeats %d is too few", t.Repeats), "the median of runs and the run-to-run spread need at least 3 runs")
	}
	if t.Warmup < 0 {
		d.errField(f+".warmup", "warmup must not be negative", "")
	}
	if t.Threshold <= 0 || t.Threshold >= 1 {
		d.errField(f+".threshold", fmt.Sprintf("threshold %s out of range", t.Threshold), "between 0% and 100%, e.g. 5%")
	}
	if t.Confidence < 0.8 || t.Confidence > 0.9999 {
		d.errField(f+".confidence", fmt.Sprintf("confidence %g out of range", t.Confidence), "a fraction between 0.8 and 0.9999, e.g. 0.995")
	}
	if t.NoiseSigmas < 0 || t.NoiseSigmas > 10 {
		d.errField(f+".noise_sigmas", fmt.Sprintf("noise_sigmas %g out of range", t.NoiseSigmas), "0 (off) to 10; default 3")
	}
	d.validateTierPolicy(f, t)
	if len(t.Metrics) == 0 {
		d.errField(f+".metrics", "no gated metrics", "list at least one, e.g. tpot_p90: 5%")
	}
	for _, class := range []struct {
		key string
		m   map[string]Threshold
	}{{"metrics", t.Metrics}, {"secondary", t.Secondary}} {
		for _, name := range sortedKeys(class.m) {
			d.validateMetric(f+"."+class.key+"."+name, name, class.m[name], t)
		}
	}
	for _, name := range sortedKeys(t.Secondary) {
		if _, both := t.Metrics[name]; both {
			d.errField(f+".secondary."+name, fmt.Sprintf("%s is both gated and secondary", name), "keep it in one list")
		}
	}
	for i, m := range t.Matrix {
		mf := fmt.Sprintf("%s.matrix[%d]", f, i)
		if m.MaxConcurrency < 0 || m.InputLen < 0 || m.OutputLen < 0 {
			d.errField(mf, "matrix values must not be negative", "")
		}
	}
}

func (d *decoder) validateMetric(f, name string, th Threshold, t Tier) {
	info, ok := LookupMetric(name)
	if !ok {
		d.errField(f, fmt.Sprintf("unknown metric %q", name), orList(didYouMean(name, knownMetricNames()),
			"metrics are ttft|tpot|itl|e2el with _mean, _median or _pNN, output_throughput, request_throughput, total_token_throughput, error_rate, gpu_mem_used, gpu_power, engine_cpu_per_token"))
		return
	}
	if !info.Absolute && th.Limit >= 1 {
		d.errField(f, fmt.Sprintf("limit %s is 100%% or more", Percent(th.Limit)), "a relative limit below 100%, e.g. 5%")
	}
	if th.Direction != info.Natural && d.signed[f] {
		want := "5%"
		if info.Natural == LowerIsWorse {
			want = "-5%"
		}
		d.errField(f, fmt.Sprintf("sign says %s but %s is %s", strings.ReplaceAll(string(th.Direction), "_", " "), name, strings.ReplaceAll(string(info.Natural), "_", " ")),
			fmt.Sprintf("write it like %s, or set direction: explicitly", want))
	}
	if info.Percentile > 50 && t.Prompts > 0 {
		tail := float64(t.Prompts) * (1 - info.Percentile/100)
		if tail < minTailRequests-1e-9 {
			noun := "requests"
			if tail < 1.5 {
				noun = "request"
			}
			d.errField(f, fmt.Sprintf("%s of %d requests rests on %.0f %s", info.Stat, t.Prompts, tail, noun),
				fmt.Sprintf("gate a median or p90 here, or raise prompts to at least %.0f", minTailRequests/(1-info.Percentile/100)))
		}
	}
}
