package engineinfo

import (
	"bufio"
	"bytes"
	"regexp"
	"sort"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// vLLM publishes its configuration as the labels of info series on
// /metrics (vllm:cache_config_info, and in newer releases more
// *_config_info): one series, value 1, a label per setting.
var infoSeries = regexp.MustCompile(`^(vllm:\w+_config_info)\{(.*)\}\s+\S+`)

var labelRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// vllmFlag is the command-line flag a label answers to, where its name
// is not the label's.
var vllmFlag = map[string]string{
	"cache_dtype": "--kv-cache-dtype",
}

// ParseVLLMMetrics reads the settings from vLLM's /metrics text.
func ParseVLLMMetrics(b []byte) []result.Setting {
	var out []result.Setting
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := infoSeries.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var batch []result.Setting
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			name, value := l[1], l[2]
			if name == "engine" || name == "model_name" {
				continue
			}
			flag := vllmFlag[name]
			if flag == "" {
				flag = "--" + strings.ReplaceAll(name, "_", "-")
			}
			batch = append(batch, result.Setting{Name: name, Value: value, Source: "/metrics " + m[1],
				Evidence: name + `="` + value + `"`, Knobs: []string{flag, name}})
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].Name < batch[j].Name })
		out = append(out, batch...)
	}
	return out
}

// vLLM's start-up log states the engine's configuration once, on the line
// "Initializing a V1 LLM engine (vX) with config: k=v, k=v, …", and what
// the KV cache got on "GPU KV cache size: N tokens".
var (
	vllmConfigLine = regexp.MustCompile(`Initializing a V1 LLM engine \(v?([^)\s]+)\) with config: (.*)$`)
	vllmKVLine     = regexp.MustCompile(`GPU KV cache size: ([\d,]+) tokens`)
	vllmBatched    = regexp.MustCompile(`max_num_batched_tokens=(\d+)`)
	// vllmConfigKeys are the config line's keys a change could set, with
	// the flags that set them.
	vllmConfigKeys = map[string][]string{
		"dtype":                  {"--dtype"},
		"max_seq_len":            {"--max-model-len", "max_model_len"},
		"tensor_parallel_size":   {"--tensor-parallel-size", "-tp"},
		"pipeline_parallel_size": {"--pipeline-parallel-size", "-pp"},
		"quantization":           {"--quantization", "-q"},
		"enforce_eager":          {"--enforce-eager"},
		"kv_cache_dtype":         {"--kv-cache-dtype", "kv_cache_dtype"},
		"enable_prefix_caching":  {"--enable-prefix-caching", "--no-enable-prefix-caching"},
	}
)

// ParseVLLMLog reads the effective settings and the version from a vLLM
// server's start-up log; the last start's lines win.
func ParseVLLMLog(log []byte) (version string, out []result.Setting) {
	vals := map[string]result.Setting{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := vllmConfigLine.FindStringSubmatch(line); m != nil {
			version = m[1]
			for _, kv := range splitTopLevel(m[2]) {
				k, v, ok := strings.Cut(kv, "=")
				if knobs, want := vllmConfigKeys[strings.TrimSpace(k)]; ok && want {
					k = strings.TrimSpace(k)
					vals[k] = result.Setting{Name: k, Value: strings.TrimPrefix(strings.TrimSpace(v), "torch."), Source: "log",
						Evidence: k + "=" + strings.TrimSpace(v) + " (vLLM's engine config line)", Knobs: knobs}
				}
			}
		}
		if m := vllmKVLine.FindStringSubmatch(line); m != nil {
			vals["kv_cache_tokens"] = result.Setting{Name: "kv_cache_tokens", Value: strings.ReplaceAll(m[1], ",", ""), Source: "log",
				Evidence: strings.TrimSpace(line[strings.Index(line, "GPU KV cache size"):]),
				Knobs:    []string{"--gpu-memory-utilization", "--kv-cache-dtype", "--max-model-len", "--block-size"}}
		}
		if strings.Contains(line, "Chunked prefill is enabled") {
			if m := vllmBatched.FindStringSubmatch(line); m != nil {
				vals["max_num_batched_tokens"] = result.Setting{Name: "max_num_batched_tokens", Value: m[1], Source: "log",
					Evidence: "max_num_batched_tokens=" + m[1] + " (chunked prefill)", Knobs: []string{"--max-num-batched-tokens"}}
			}
		}
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, vals[n])
	}
	return version, out
}

// splitTopLevel splits "a=1, b=X(c=2, d=3), e='f, g'" at the commas that
// are outside brackets and quotes.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			depth--
		case r == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}
