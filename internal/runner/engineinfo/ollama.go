package engineinfo

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// ollamaLogValues are the start-up log's effective values: llama.cpp's
// context and KV cache lines, printed by the runner process Ollama starts
// for the model, and the runner's own command line.
var ollamaLogValues = []struct {
	re    *regexp.Regexp
	names []string // one per capture group
	knobs []string
}{
	{regexp.MustCompile(`^llama_context: flash_attn\s*=\s*(\S+)`), []string{"flash_attn"}, []string{"OLLAMA_FLASH_ATTENTION"}},
	{regexp.MustCompile(`^llama_context: n_ctx\s*=\s*(\d+)`), []string{"n_ctx"}, []string{"num_ctx", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL"}},
	{regexp.MustCompile(`^llama_context: n_ctx_per_seq\s*=\s*(\d+)`), []string{"n_ctx_per_seq"}, []string{"num_ctx", "OLLAMA_CONTEXT_LENGTH"}},
	{regexp.MustCompile(`^llama_context: n_batch\s*=\s*(\d+)`), []string{"n_batch"}, []string{"num_batch"}},
	{regexp.MustCompile(`^llama_context: n_seq_max\s*=\s*(\d+)`), []string{"n_seq_max"}, []string{"OLLAMA_NUM_PARALLEL"}},
	{regexp.MustCompile(`^llama_kv_cache\w*: .*type_k = '([^']+)', type_v = '([^']+)'`), []string{"type_k", "type_v"}, []string{"OLLAMA_KV_CACHE_TYPE"}},
}

// ollamaFlags are the runner's command-line flags (the "starting llama
// server" line): what Ollama asked llama.cpp for, after its own defaults.
var ollamaFlags = map[string]struct {
	name  string
	knobs []string
}{
	"--ctx-size":      {"ctx-size", []string{"num_ctx", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL"}},
	"--batch-size":    {"batch-size", []string{"num_batch"}},
	"--threads":       {"threads", []string{"num_thread"}},
	"--parallel":      {"parallel", []string{"OLLAMA_NUM_PARALLEL"}},
	"--kv-cache-type": {"kv-cache-type", []string{"OLLAMA_KV_CACHE_TYPE"}},
	"--n-gpu-layers":  {"n-gpu-layers", []string{"num_gpu"}},
}

// ollamaWarnings tie Ollama's "this knob was ignored" warnings to the
// settings they concern.
var ollamaWarnings = []struct {
	contains string
	settings []string
}{
	{"flash attention enabled but not supported", []string{"flash_attn"}},
	{"quantized kv cache requested but flash attention disabled", []string{"type_k", "type_v"}},
	{"kv cache type not supported by model", []string{"type_k", "type_v"}},
}

var (
	msgRe  = regexp.MustCompile(`msg="([^"]*)"(.*)$`)
	cmdRe  = regexp.MustCompile(`msg="starting llama server" cmd="([^"]*)"`)
	kvArgs = regexp.MustCompile(`(\w+)=(\S+)`)
)

// ParseOllamaLog reads the effective settings from an Ollama server's
// output. Where the runner started more than once (a reload), the last
// start's values win: they are what the measured requests ran on.
func ParseOllamaLog(log []byte) []result.Setting {
	vals := map[string]result.Setting{}
	var order []string
	set := func(s result.Setting) {
		if _, ok := vals[s.Name]; !ok {
			order = append(order, s.Name)
		}
		if old, ok := vals[s.Name]; ok && s.Unsupported == "" {
			s.Unsupported = old.Unsupported
		}
		vals[s.Name] = s
	}
	warned := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		for _, v := range ollamaLogValues {
			m := v.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			for i, name := range v.names {
				set(result.Setting{Name: name, Value: m[i+1], Source: "log", Evidence: line, Knobs: v.knobs})
			}
		}
		if m := cmdRe.FindStringSubmatch(line); m != nil {
			f := strings.Fields(m[1])
			for i := 0; i+1 < len(f); i++ {
				if flag, ok := ollamaFlags[f[i]]; ok {
					set(result.Setting{Name: flag.name, Value: f[i+1], Source: "log", Evidence: flag.name + " " + f[i+1] + " (the llama server's command line)", Knobs: flag.knobs})
				}
			}
			if strings.Contains(m[1], "--flash-attn") {
				set(result.Setting{Name: "flash-attn flag", Value: "set", Source: "log", Evidence: "--flash-attn (the llama server's command line)", Knobs: []string{"OLLAMA_FLASH_ATTENTION"}})
			}
		}
		if strings.Contains(line, "level=WARN") {
			if m := msgRe.FindStringSubmatch(line); m != nil {
				for _, w := range ollamaWarnings {
					if strings.Contains(m[1], w.contains) {
						text := m[1]
						if extra := kvArgs.FindAllString(m[2], -1); len(extra) > 0 {
							text += " (" + strings.Join(extra, " ") + ")"
						}
						for _, s := range w.settings {
							warned[s] = text
						}
					}
				}
			}
		}
	}
	out := make([]result.Setting, 0, len(order))
	for _, name := range order {
		s := vals[name]
		if w, ok := warned[name]; ok {
			s.Unsupported = w
		}
		out = append(out, s)
	}
	return out
}

// ParseOllamaParameters reads /api/show's "parameters" text (one
// "name value" per line, as the Modelfile set them).
func ParseOllamaParameters(p string) []result.Setting {
	var out []result.Setting
	for _, line := range strings.Split(p, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := f[0]
		out = append(out, result.Setting{Name: name, Value: strings.Join(f[1:], " "), Source: "/api/show",
			Evidence: strings.Join(f, " "), Knobs: []string{name}})
	}
	return out
}
