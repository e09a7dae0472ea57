package demo

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/perfgate/perfgate/internal/runner/gguf"
)

// The demo's engines.
const (
	EngineSim    = "sim"
	EngineOllama = "ollama"
)

// OllamaInstall is the one line that installs the real engine the demo
// and the real-engine tests use: Ollama built from the Go module proxy
// with cgo (it bundles llama.cpp) for this machine's CPU, 15–30 minutes on
// two cores the first time, seconds from the Go build cache after. Without
// -march=native ggml runs its generic kernels, 6–9× slower here.
const OllamaInstall = `CGO_ENABLED=1 CGO_CFLAGS="-O2 -march=native" CGO_CXXFLAGS="-O2 -march=native" go install github.com/ollama/ollama@` + OllamaVersion

// OllamaVersion is the newest Ollama release that builds from its Go
// module here (later ones keep headers under vendor/, which module zips
// drop).
const OllamaVersion = "v0.9.6"

// ollamaEnv is the variable the demo's runner passes the Ollama binary in;
// the repository's serve.sh runs "${OLLAMA_BIN:-ollama}".
const ollamaEnv = "OLLAMA_BIN"

// ollamaModel is the model id the demo repository's engine serves.
const ollamaModel = "perfgate-tiny:latest"

// FindOllama returns the ollama binary: $OLLAMA_BIN, then PATH, then the
// Go bin directory `go install` writes to; an error says how to install
// it.
func FindOllama() (string, error) {
	if p := os.Getenv(ollamaEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", ollamaEnv, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("ollama"); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "ollama")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("no ollama binary (looked at $OLLAMA_BIN, PATH and the Go bin directory): install it with\n  " + OllamaInstall)
}

// OllamaIdentity is "ollama v0.9.6", read from the binary's Go build
// information (a go-installed Ollama reports version 0.0.0 itself).
func OllamaIdentity(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil || info.Main.Version == "" {
		return "ollama (version unknown)"
	}
	return "ollama " + info.Main.Version
}

// ollamaModelSpec is the model on main; the slow pull request swaps in a
// deeper one.
func ollamaModelSpec() gguf.Llama {
	return gguf.TinyLlama()
}

// deeperModelSpec is the slow pull request's model: six blocks instead of
// four and width 320 instead of 256, about twice the compute per token: a
// model swap, the commonest way a serving team loses throughput.
func deeperModelSpec() gguf.Llama {
	m := gguf.TinyLlama()
	m.Layers, m.Width, m.Heads, m.KVHeads, m.FF = 6, 320, 5, 5, 960
	return m
}

// ollamaRepoConfig is the repository's .github/perfgate.yml: the engine is
// inference_engine/serve.sh from the commit's checkout, which starts
// `ollama serve` with the checkout's server settings and creates the model
// from the checkout's model/Modelfile. The load is small enough for a
// CPU: 40 prompts of 16 words, 8 output tokens, 4 at a time.
//
// The quick tier is designed for a CPU runner shared with other work (see
// docs/real-engine.md, "Why the docs-only PR was never passed"):
//
//   - it gates the engine's CPU time per output token: a neighbour's
//     load delays every request (wall-clock medians of back-to-back runs
//     spread 20–40% at load 20 on two cores) but barely changes the work
//     the engine does per token (2–6%); a bigger model doubles it. The
//     wall-clock metrics are shown as secondary, never blocking;
//   - base and head are interleaved on the runner (8 ABBA pairs, 9 engine
//     starts: the gate's units), so what is left of the load's drift and
//     any per-start state cancel instead of being compared with a
//     baseline measured at another load.
func ollamaRepoConfig(string) string {
	return `paths: ["model/**", "inference_engine/**"]
server:
  command: ["bash", "{{.Workdir}}/inference_engine/serve.sh", "{{.Port}}"]
  model: ` + ollamaModel + `
  readiness_url: /api/version
  start_timeout: 5m
workload:
  dataset: random
  input_len: 16
  output_len: 8
  max_concurrency: 4
  endpoint: /v1/completions
tiers:
  quick:
    prompts: 40
    repeats: 3
    warmup: 4
    interleave: true
    pairs: 8
    metrics: {engine_cpu_per_token: 15%, itl_median: "off", ttft_p90: "off", output_throughput: "off"}
    secondary: {itl_median: 15%, output_throughput: -15%, tpot_p90: "off", e2el_median: "off", gpu_mem_used: "off", gpu_power: "off"}
profile:
  command: ["bash", "{{.Workdir}}/inference_engine/profile.sh", "{{.PID}}", "{{.Out}}", "5"]
`
}

// ollamaServe is inference_engine/serve.sh: the engine's start script,
// part of the repository, so a pull request can change how its engine
// starts and is measured with that change.
const ollamaServe = `#!/usr/bin/env bash
# Starts the inference engine from this checkout: Ollama with the server
# settings in inference_engine/ollama.env, a models directory of its own,
# and the model made from model/Modelfile. perfgate's runner starts it as
#   bash <checkout>/inference_engine/serve.sh PORT
# and waits until /v1/models lists the model.
set -euo pipefail
port=${1:?usage: serve.sh PORT}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ollama=${OLLAMA_BIN:-ollama}
models=$(mktemp -d "${TMPDIR:-/tmp}/engine-models-XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$models"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
set -a
. "$root/inference_engine/ollama.env"
set +a
# ENGINE_BIND: the address to listen on; an engine image sets 0.0.0.0,
# where the sandbox's relay reaches it.
export OLLAMA_HOST="${ENGINE_BIND:-127.0.0.1}:$port" OLLAMA_MODELS="$models"
"$ollama" serve &
pid=$!
for _ in $(seq 1 600); do
  "$ollama" list >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "ollama serve exited during start-up" >&2; exit 1; }
  sleep 0.1
done
(cd "$root/model" && "$ollama" create perfgate-tiny -f Modelfile >/dev/null)
echo "engine ready: $("$ollama" --version 2>&1 | tail -n 1), model perfgate-tiny from model/Modelfile" >&2
wait "$pid"
`

// ollamaProfile is inference_engine/profile.sh, the repository's
// profile.command: Ollama has no /start_profile, so the runner starts this
// beside the profiled load. It samples the engine's processes (its process
// group: serve.sh, ollama serve, the llama.cpp runner) with perf's
// cpu-clock software event and writes a call-graph profile, a flat report
// by symbol and perf stat's software counters. Hardware counters
// (instructions, cycles) are not offered inside this machine's VM;
// cpu-clock sampling needs none.
const ollamaProfile = `#!/usr/bin/env bash
# usage: profile.sh ENGINE_PID OUT_DIR [SECONDS]
# perfgate's runner runs it with the profiled load (profile.command).
set -euo pipefail
pid=${1:?usage: profile.sh ENGINE_PID OUT_DIR [SECONDS]}
out=${2:?usage: profile.sh ENGINE_PID OUT_DIR [SECONDS]}
secs=${3:-5}
command -v perf >/dev/null || { echo "profile.sh: no perf on the runner (Debian: apt-get install linux-perf)" >&2; exit 1; }
# The engine runs in a process group of its own, led by ENGINE_PID; the
# runner profiles after its warm-up, so Ollama's llama.cpp runner process
# (started at the first request) is in it.
pids=$(pgrep -d, -g "$pid")
[ -n "$pids" ] || { echo "profile.sh: no process in the engine's group $pid" >&2; exit 1; }
perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$pids" -o "$out/perf-stat.txt" -- sleep "$secs" &
perf record -q -e cpu-clock -F 499 -g -p "$pids" -o "$out/perf.data" -- sleep "$secs"
wait
perf report -i "$out/perf.data" --stdio --no-children --sort dso,symbol -g none > "$out/perf-report.txt" 2>/dev/null
`

// ollamaSettings is inference_engine/ollama.env: the server-wide knobs.
// One thread per slot batch: on a shared two-core machine ggml's thread
// barrier collapses under contention (64 tokens took 0.7 s with one
// thread and 69 s with two on a loaded host).
const ollamaSettings = `# Ollama's server settings (environment variables), read by serve.sh.
OLLAMA_NUM_PARALLEL=4
OLLAMA_MAX_LOADED_MODELS=1
OLLAMA_KEEP_ALIVE=-1
OLLAMA_FLASH_ATTENTION=0
OLLAMA_KV_CACHE_TYPE=f16
OLLAMA_NOPRUNE=1
`

// ollamaSettingsWith is ollama.env with flash attention and the KV cache
// type set as given.
func ollamaSettingsWith(fa, kv string) string {
	s := strings.Replace(ollamaSettings, "OLLAMA_FLASH_ATTENTION=0", fa, 1)
	return strings.Replace(s, "OLLAMA_KV_CACHE_TYPE=f16", kv, 1)
}

// modelfile is model/Modelfile: the model and its runtime parameters.
func modelfile(gguf string) string {
	return `# The served model: a small llama-architecture model (random weights,
# made with perfgate gguf) and its runtime parameters.
FROM ./` + gguf + `
TEMPLATE "{{ .Prompt }}"
PARAMETER num_ctx 1024
PARAMETER num_batch 512
PARAMETER num_thread 1
`
}

// ollamaLayout is the demo repository for the real engine: main with the
// tiny model; #17 swaps in a deeper model (a real change that slows every
// token); #18 edits model/README.md.
func ollamaLayout() (repoLayout, error) {
	base, err := ggufBytes(ollamaModelSpec())
	if err != nil {
		return repoLayout{}, err
	}
	deep, err := ggufBytes(deeperModelSpec())
	if err != nil {
		return repoLayout{}, err
	}
	readme := "# model\n\nThe served model: model/Modelfile, from a GGUF file made with `perfgate gguf`.\n"
	return repoLayout{
		main: map[string]string{
			"model/perfgate-tiny.gguf":       string(base),
			"model/Modelfile":                modelfile("perfgate-tiny.gguf"),
			"model/README.md":                readme,
			"inference_engine/serve.sh":      ollamaServe,
			"inference_engine/ollama.env":    ollamaSettings,
			"inference_engine/profile.sh":    ollamaProfile,
			"inference_engine/README.md":     "# inference_engine\n\nOllama, started by serve.sh with the settings in ollama.env.\n",
			"README.md":                      "# acme/inference\n",
			"inference_engine/scheduler.txt": "continuous batching (OLLAMA_NUM_PARALLEL slots)\n",
		},
		slowBranch: "bigger-model",
		slowMsg:    "model: a bigger model (6 blocks of width 320 instead of 4 of 256)",
		slow: map[string]string{
			"model/perfgate-tiny.gguf": string(deep),
		},
		docsBranch: "model-docs",
		docsMsg:    "model: document the Modelfile",
		// #18 also turns on two knobs this CPU build ignores (Ollama logs
		// flash_attn = 0 and type_k = 'f16' and warns): the engine runs as
		// main's, the PR passes, and the check says the knobs did nothing.
		docs: map[string]string{
			"model/README.md":             readme + "\nnum_thread is 1: one thread per batch keeps a shared CPU runner steady.\n",
			"inference_engine/ollama.env": ollamaSettingsWith("OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"),
		},
		docsWhat: "edits model/README.md and sets OLLAMA_FLASH_ATTENTION=1 and OLLAMA_KV_CACHE_TYPE=q8_0, which this CPU build ignores",
		story:    "PR #%d %s swaps model/perfgate-tiny.gguf for a bigger model (6 blocks of width 320 instead of 4 of 256); PR #%d %s edits model/README.md and turns on flash attention and a q8_0 KV cache in inference_engine/ollama.env",
	}, nil
}

// fifthBlockGGUF is main's model with a fifth transformer block: about
// +19% work per output token, the real slowdown of the gate-rate runs and
// of the real-engine bisect.
func fifthBlockGGUF() string {
	m := ollamaModelSpec()
	m.Layers = 5
	return fixedGGUF(m)
}

// fixedGGUF is the file of a model spec fixed in the code, which cannot
// fail to build but for a bug in gguf.
func fixedGGUF(m gguf.Llama) string {
	b, err := ggufBytes(m)
	if err != nil {
		panic(err) // the spec is fixed: a failure is a bug in gguf
	}
	return string(b)
}

func ggufBytes(m gguf.Llama) ([]byte, error) {
	kvs, tensors, err := m.Build()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := gguf.Write(&b, kvs, tensors); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
