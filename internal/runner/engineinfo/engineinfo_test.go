package engineinfo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

func TestParseOllamaLog(t *testing.T) {
	t.Parallel()
	type want struct {
		value       string
		unsupported string // substring of the engine's warning; "" for none
	}
	tests := []struct {
		log  string
		want map[string]want
	}{
		// OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 on the CPU
		// build: both asked for, neither in effect, and Ollama says so.
		{"testdata/ollama-0.9.6-cpu-fa-q8_0.log", map[string]want{
			"flash_attn":    {"0", "flash attention enabled but not supported"},
			"type_k":        {"f16", "quantized kv cache requested but flash attention disabled (type=q8_0)"},
			"type_v":        {"f16", "quantized kv cache requested"},
			"n_ctx":         {"4096", ""},
			"n_ctx_per_seq": {"1024", ""},
			"n_seq_max":     {"4", ""},
			"ctx-size":      {"4096", ""},
			"parallel":      {"4", ""},
			"threads":       {"1", ""},
		}},
		// The defaults: nothing asked for, nothing warned.
		{"testdata/ollama-0.9.6-cpu-default.log", map[string]want{
			"flash_attn": {"0", ""},
			"type_k":     {"f16", ""},
			"n_seq_max":  {"1", ""},
			"parallel":   {"1", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.log, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(tt.log)
			if err != nil {
				t.Fatal(err)
			}
			got := &result.EngineSettings{Values: ParseOllamaLog(b)}
			for name, w := range tt.want {
				s, ok := got.Get(name)
				if !ok {
					t.Errorf("%s: not read", name)
					continue
				}
				if s.Value != w.value {
					t.Errorf("%s = %q, want %q (evidence %q)", name, s.Value, w.value, s.Evidence)
				}
				if s.Evidence == "" || len(s.Knobs) == 0 {
					t.Errorf("%s: no evidence line or knobs: %+v", name, s)
				}
				switch {
				case w.unsupported == "" && s.Unsupported != "":
					t.Errorf("%s: unexpected warning %q", name, s.Unsupported)
				case w.unsupported != "" && !contains(s.Unsupported, w.unsupported):
					t.Errorf("%s: warning %q, want one containing %q", name, s.Unsupported, w.unsupported)
				}
			}
		})
	}
}

func TestParseVLLMMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/vllm-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := &result.EngineSettings{Values: ParseVLLMMetrics(b)}
	for _, tt := range []struct{ name, value, knob string }{
		{"cache_dtype", "fp8", "--kv-cache-dtype"},
		{"block_size", "16", "--block-size"},
		{"enable_prefix_caching", "True", "--enable-prefix-caching"},
		{"gpu_memory_utilization", "0.9", "--gpu-memory-utilization"},
	} {
		s, ok := got.Get(tt.name)
		if !ok || s.Value != tt.value || !contains(s.Knobs[0], tt.knob) {
			t.Errorf("%s: got %+v (found %v), want %s answering to %s", tt.name, s, ok, tt.value, tt.knob)
		}
	}
	if _, ok := got.Get("engine"); ok {
		t.Error("the engine label is not a setting")
	}
}

func TestParseOllamaParameters(t *testing.T) {
	t.Parallel()
	got := &result.EngineSettings{Values: ParseOllamaParameters("num_thread                     1\nnum_batch                      512\nnum_ctx                        1024\n")}
	if s, ok := got.Get("num_ctx"); !ok || s.Value != "1024" || s.Knobs[0] != "num_ctx" {
		t.Errorf("num_ctx: %+v", s)
	}
}

// TestReadOllama serves Ollama's recorded answers: a go-installed binary
// answers 0.0.0, and the version must not be reported as such.
func TestReadOllama(t *testing.T) {
	t.Parallel()
	log, err := os.ReadFile("testdata/ollama-0.9.6-cpu-fa-q8_0.log")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"version":"0.0.0"}`)) })
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"parameters":"num_thread                     1\nnum_batch                      512\nnum_ctx                        1024"}`))
	})
	mux.HandleFunc("GET /api/ps", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"models":[{"name":"perfgate-tiny:latest","model":"perfgate-tiny:latest","size":73754624,"size_vram":0}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	info := Read(context.Background(), Engine{BaseURL: srv.URL, Model: "perfgate-tiny:latest", Log: log})
	if info.Identity.Name != "ollama" || info.Identity.Version == "0.0.0" || !contains(info.Identity.Version, "0.0.0") {
		t.Errorf("identity %+v: want ollama, 0.0.0 said to be a source build (no process to read)", info.Identity)
	}
	for name, value := range map[string]string{"flash_attn": "0", "num_ctx": "1024", "processor": "100% CPU"} {
		if s, ok := info.Settings.Get(name); !ok || s.Value != value {
			t.Errorf("%s: %+v, want %s", name, s, value)
		}
	}
}

func TestReadVLLM(t *testing.T) {
	t.Parallel()
	metrics, err := os.ReadFile("testdata/vllm-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"version":"0.10.1"}`)) })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"data":[{"id":"m","max_model_len":8192}]}`))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { w.Write(metrics) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	info := Read(context.Background(), Engine{BaseURL: srv.URL, Model: "m"})
	if info.Identity != (Identity{Name: "vllm", Version: "0.10.1"}) {
		t.Errorf("identity %+v", info.Identity)
	}
	if s, ok := info.Settings.Get("max_model_len"); !ok || s.Value != "8192" {
		t.Errorf("max_model_len: %+v", s)
	}
	if s, ok := info.Settings.Get("cache_dtype"); !ok || s.Value != "fp8" {
		t.Errorf("cache_dtype: %+v", s)
	}
}

func TestModuleVersionOfOllama(t *testing.T) {
	bin := os.Getenv("OLLAMA_BIN")
	if bin == "" {
		bin = "/root/go/bin/ollama"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("no ollama binary")
	}
	if v := ModuleVersion(bin, "github.com/ollama/ollama"); v == "" || v[0] != 'v' {
		t.Errorf("ModuleVersion(%s) = %q, want the module's release", bin, v)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestKnobChanges(t *testing.T) {
	t.Parallel()
	base, head := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		p := dir + "/" + name
		if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := "OLLAMA_NUM_PARALLEL=4\nOLLAMA_FLASH_ATTENTION=0\nOLLAMA_KV_CACHE_TYPE=f16\n"
	write(base, "inference_engine/ollama.env", env)
	write(head, "inference_engine/ollama.env", "OLLAMA_NUM_PARALLEL=4\nOLLAMA_FLASH_ATTENTION=1\nOLLAMA_KV_CACHE_TYPE=q8_0\n")
	write(base, "model/Modelfile", "PARAMETER num_ctx 1024\n")
	write(head, "model/Modelfile", "PARAMETER num_ctx 1024\n")
	write(base, "model/README.md", "a\n")
	write(head, "model/README.md", "num_ctx is 1024: prose names a knob and sets nothing\n")
	write(base, "model/notes", "a\n")
	write(head, "model/notes", "num_ctx_per_seq is not a knob; OLLAMA_FLASH_ATTENTIONS neither\n# num_ctx 4096 in a comment\n")
	// A link out of the tree is not followed.
	outside := t.TempDir() + "/secret.env"
	write(filepath.Dir(outside), "secret.env", "OLLAMA_NUM_PARALLEL=64\n")
	if err := os.Symlink(outside, head+"/inference_engine/linked.env"); err != nil {
		t.Fatal(err)
	}
	got := KnobChanges(base, head, []string{"OLLAMA_FLASH_ATTENTION", "OLLAMA_KV_CACHE_TYPE", "num_ctx", "OLLAMA_NUM_PARALLEL"})
	want := []result.KnobChange{
		{Knob: "OLLAMA_FLASH_ATTENTION", File: "inference_engine/ollama.env", Line: 2, Text: "OLLAMA_FLASH_ATTENTION=1"},
		{Knob: "OLLAMA_KV_CACHE_TYPE", File: "inference_engine/ollama.env", Line: 3, Text: "OLLAMA_KV_CACHE_TYPE=q8_0"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseVLLMLog(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/vllm-startup.log")
	if err != nil {
		t.Fatal(err)
	}
	version, values := ParseVLLMLog(b)
	if version != "0.10.2" {
		t.Errorf("version %q, want 0.10.2", version)
	}
	got := &result.EngineSettings{Values: values}
	for _, tt := range []struct{ name, value, knob string }{
		{"dtype", "bfloat16", "--dtype"},
		{"max_seq_len", "2048", "--max-model-len"},
		{"kv_cache_dtype", "fp8", "--kv-cache-dtype"},
		{"enforce_eager", "True", "--enforce-eager"},
		{"tensor_parallel_size", "1", "--tensor-parallel-size"},
		{"enable_prefix_caching", "True", "--enable-prefix-caching"},
		{"max_num_batched_tokens", "2048", "--max-num-batched-tokens"},
		{"kv_cache_tokens", "577328", "--gpu-memory-utilization"},
	} {
		s, ok := got.Get(tt.name)
		if !ok || s.Value != tt.value || s.Knobs[0] != tt.knob || s.Evidence == "" {
			t.Errorf("%s: %+v (found %v), want %s answering to %s", tt.name, s, ok, tt.value, tt.knob)
		}
	}
	// A nested value's or a quoted value's commas do not split the line.
	if parts := splitTopLevel("a=1, b=X(c=2, d=3), e='f, g'"); strings.Join(parts, "|") != "a=1|b=X(c=2, d=3)|e='f, g'" {
		t.Errorf("split %q", parts)
	}
}
