// Package engineinfo reads what an engine is and what it actually runs
// with: its name and version from its own API (and, for a go-installed
// Ollama that reports 0.0.0, from the binary's build information), and
// its effective settings from its API and its start-up log. The agent
// stores both with every run, so the check tells the truth about the
// engine rather than about the configuration that asked for it.
package engineinfo

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/runner/proc"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Identity is the engine as it names itself.
type Identity struct {
	Name    string // "ollama", "vllm"; "" when the engine answered neither API
	Version string // "v0.9.6", "0.6.3"
}

// Engine is what the reader needs of a started engine.
type Engine struct {
	BaseURL string
	Model   string
	// PID is the engine's process (group leader), 0 when unknown (an
	// image engine): the binaries of its process tree are where a
	// source-built Ollama's version is read.
	PID int
	// Log is the engine's captured output (its start-up log included).
	Log []byte
	// Sim is perfgate's own simulated engine: it names itself through
	// the agent, and publishes vLLM's /v1/models and /metrics.
	Sim bool
}

// Info is what Read found.
type Info struct {
	Identity Identity
	Settings *result.EngineSettings
}

// timeout bounds each API call: the engine is idle between runs and
// answers in milliseconds; a slow answer must not hold the job.
const timeout = 5 * time.Second

// Read identifies the engine and reads its effective settings. It never
// fails: what it cannot read is left out.
func Read(ctx context.Context, e Engine) Info {
	c := &http.Client{Timeout: timeout}
	var info Info
	if e.Sim {
		info.Identity = Identity{Name: "perfgate-sim", Version: perfgateVersion()}
		info.Settings = readVLLM(ctx, c, e)
		return info
	}
	if v, ok := getJSON[struct {
		Version string `json:"version"`
	}](ctx, c, e.BaseURL+"/api/version"); ok && v.Version != "" {
		info.Identity = Identity{Name: "ollama", Version: v.Version}
		if v.Version == "0.0.0" || v.Version == "" {
			// A go-installed Ollama knows no release: its module does.
			if bv := treeModuleVersion("/proc", e.PID, "github.com/ollama/ollama"); bv != "" {
				info.Identity.Version = bv
			} else {
				info.Identity.Version = "0.0.0 (a source build without a release version)"
			}
		}
		info.Settings = readOllama(ctx, c, e)
		return info
	}
	if v, ok := getJSON[struct {
		Version string `json:"version"`
		Engine  string `json:"engine"` // perfgate's sim names itself
	}](ctx, c, e.BaseURL+"/version"); ok && v.Version != "" {
		info.Identity = Identity{Name: "vllm", Version: v.Version}
		if v.Engine != "" {
			info.Identity.Name = v.Engine
		}
		info.Settings = readVLLM(ctx, c, e)
	}
	return info
}

// readOllama joins the API's view (/api/show's parameters, /api/ps's
// placement) with the start-up log's effective values.
func readOllama(ctx context.Context, c *http.Client, e Engine) *result.EngineSettings {
	s := &result.EngineSettings{Values: ParseOllamaLog(e.Log)}
	if e.Model != "" {
		body := strings.NewReader(fmt.Sprintf(`{"model":%q}`, e.Model))
		if show, ok := postJSON[struct {
			Parameters string `json:"parameters"`
		}](ctx, c, e.BaseURL+"/api/show", body); ok {
			s.Values = append(s.Values, ParseOllamaParameters(show.Parameters)...)
		}
	}
	if ps, ok := getJSON[ollamaPS](ctx, c, e.BaseURL+"/api/ps"); ok {
		s.Values = append(s.Values, ps.settings(e.Model)...)
	}
	if len(s.Values) == 0 {
		return nil
	}
	return s
}

// readVLLM reads the start-up log's engine config, /v1/models'
// max_model_len and the labels of /metrics' *_config_info series.
func readVLLM(ctx context.Context, c *http.Client, e Engine) *result.EngineSettings {
	_, fromLog := ParseVLLMLog(e.Log)
	s := &result.EngineSettings{Values: fromLog}
	if m, ok := getJSON[struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}](ctx, c, e.BaseURL+"/v1/models"); ok {
		for _, d := range m.Data {
			if d.MaxModelLen > 0 && (e.Model == "" || d.ID == e.Model) {
				s.Values = append(s.Values, result.Setting{Name: "max_model_len", Value: strconv.Itoa(d.MaxModelLen),
					Source: "/v1/models", Knobs: []string{"--max-model-len", "max_model_len"}})
			}
		}
	}
	if b, ok := get(ctx, c, e.BaseURL+"/metrics"); ok {
		s.Values = append(s.Values, ParseVLLMMetrics(b)...)
	}
	if len(s.Values) == 0 {
		return nil
	}
	return s
}

// ollamaPS is /api/ps: where each loaded model sits.
type ollamaPS struct {
	Models []struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		SizeVRAM int64  `json:"size_vram"`
	} `json:"models"`
}

func (p ollamaPS) settings(model string) []result.Setting {
	for _, m := range p.Models {
		if model != "" && m.Name != model && strings.TrimSuffix(m.Name, ":latest") != strings.TrimSuffix(model, ":latest") {
			continue
		}
		where := "100% CPU"
		if m.Size > 0 && m.SizeVRAM > 0 {
			gpu := float64(m.SizeVRAM) / float64(m.Size) * 100
			where = fmt.Sprintf("%.0f%% GPU", gpu)
			if gpu < 99.5 {
				where = fmt.Sprintf("%.0f%%/%.0f%% CPU/GPU", 100-gpu, gpu)
			}
		}
		return []result.Setting{{Name: "processor", Value: where, Source: "/api/ps",
			Evidence: fmt.Sprintf("size %d, size_vram %d", m.Size, m.SizeVRAM), Knobs: []string{"num_gpu"}}}
	}
	return nil
}

// treeModuleVersion is the main-module version of the first binary in the
// process tree under root whose main module is module: the engine is often
// a script that starts the binary.
func treeModuleVersion(proc string, root int, module string) string {
	if root <= 0 {
		return ""
	}
	for _, pid := range descendants(proc, root) {
		exe, err := os.Readlink(fmt.Sprintf("%s/%d/exe", proc, pid))
		if err != nil {
			continue
		}
		if v := ModuleVersion(exe, module); v != "" {
			return v
		}
	}
	return ""
}

// perfgateVersion is this binary's module version, "devel" when built
// from a checkout.
func perfgateVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// ModuleVersion is the version of the binary at path when its main module
// is module ("v0.9.6"), else "".
func ModuleVersion(path, module string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil || bi.Main.Path != module || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return ""
	}
	return bi.Main.Version
}

// descendants lists root and its descendants, root first.
func descendants(root string, pid int) []int {
	return proc.Descendants(proc.All(root), pid, 4096)
}

func get(ctx context.Context, c *http.Client, url string) ([]byte, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false
	}
	return do(c, req)
}

func do(c *http.Client, req *http.Request) ([]byte, bool) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, false
	}
	return b, true
}

func getJSON[T any](ctx context.Context, c *http.Client, url string) (T, bool) {
	var v T
	b, ok := get(ctx, c, url)
	if !ok || json.Unmarshal(b, &v) != nil {
		return v, false
	}
	return v, true
}

func postJSON[T any](ctx context.Context, c *http.Client, url string, body io.Reader) (T, bool) {
	var v T
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return v, false
	}
	req.Header.Set("Content-Type", "application/json")
	b, ok := do(c, req)
	if !ok || json.Unmarshal(b, &v) != nil {
		return v, false
	}
	return v, true
}
