package ollama_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
	"github.com/perfgate/perfgate/internal/runner/engineinfo"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// TestOllamaEffectiveSettings starts the real engine from two checkouts:
// main, and a head that sets OLLAMA_FLASH_ATTENTION=1 and
// OLLAMA_KV_CACHE_TYPE=q8_0 (which the CPU build ignores, saying so in its
// log) and raises the Modelfile's num_ctx (which takes effect). What the
// agent reads from each engine must say exactly that: the version from
// the binary, "no effect" with Ollama's own warning for the two knobs,
// and num_ctx's effective value moved.
func TestOllamaEffectiveSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real engine twice: about 20 seconds")
	}
	ollama, err := demo.FindOllama()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the real-engine test: %v", err)
		}
		t.Skipf("no real engine here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	baseDir, headDir := t.TempDir(), t.TempDir()
	if err := demo.WriteOllamaMain(headDir); err != nil {
		t.Fatal(err)
	}
	edit := func(name, from, to string) {
		p := filepath.Join(headDir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), from) {
			t.Fatalf("%s has no %q", name, from)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("inference_engine/ollama.env", "OLLAMA_FLASH_ATTENTION=0", "OLLAMA_FLASH_ATTENTION=1")
	edit("inference_engine/ollama.env", "OLLAMA_KV_CACHE_TYPE=f16", "OLLAMA_KV_CACHE_TYPE=q8_0")
	edit("model/Modelfile", "PARAMETER num_ctx 1024", "PARAMETER num_ctx 2048")

	if err := demo.WriteOllamaMain(baseDir); err != nil {
		t.Fatal(err)
	}
	read := func(dir string) engineinfo.Info {
		srv, err := startAt(ctx, dir, ollama)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.stop()
		// The llama.cpp runner, whose log states the settings, starts at
		// the first request.
		if _, err := bench.Run(ctx, bench.Options{Target: srv.url, Endpoint: bench.EndpointCompletions, Model: demo.OllamaModel,
			NumPrompts: 2, InputLen: 8, OutputLen: 4, MaxConcurrency: 1}); err != nil {
			t.Fatal(err)
		}
		return engineinfo.Read(ctx, engineinfo.Engine{BaseURL: srv.url, Model: demo.OllamaModel, PID: srv.pid, Log: srv.logs()})
	}
	base, head := read(baseDir), read(headDir)
	t.Logf("base: %s %s; head: %s %s", base.Identity.Name, base.Identity.Version, head.Identity.Name, head.Identity.Version)
	for _, info := range []engineinfo.Info{base, head} {
		if info.Identity.Name != "ollama" || !strings.HasPrefix(info.Identity.Version, "v") {
			t.Errorf("identity %+v: want ollama and the module's release", info.Identity)
		}
	}
	head.Settings.Changes = engineinfo.KnobChanges(baseDir, headDir, head.Settings.Knobs())
	d := result.DiffSettings(base.Settings, head.Settings)
	if d.Empty() {
		t.Fatalf("no settings diff; base %+v head %+v", base.Settings, head.Settings)
	}
	var noEffect, effect []string
	for _, e := range d.NoEffect {
		noEffect = append(noEffect, e.Sentence())
	}
	for _, e := range d.Effect {
		effect = append(effect, e.EffectSentence())
	}
	t.Logf("no effect:\n%s\neffect:\n%s\nchanged: %+v", strings.Join(noEffect, "\n"), strings.Join(effect, "\n"), d.Changed)
	all := strings.Join(noEffect, "\n")
	for _, want := range []string{
		"`OLLAMA_FLASH_ATTENTION=1` (inference_engine/ollama.env:5) — the engine ran with flash_attn = `0` and warned: `flash attention enabled but not supported",
		"`OLLAMA_KV_CACHE_TYPE=q8_0` (inference_engine/ollama.env:6) — the engine ran with type_k = `f16` and warned: `quantized kv cache requested but flash attention disabled",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no-effect lines lack %q", want)
		}
	}
	if !strings.Contains(strings.Join(effect, "\n"), "`PARAMETER num_ctx 2048` (model/Modelfile:") {
		t.Errorf("num_ctx's change is not shown as taking effect: %q", effect)
	}
}

type started struct {
	url  string
	pid  int
	logs func() []byte
	stop func()
}

// startAt starts the checkout's serve.sh as the runner does
// (demo.StartOllama would write main's files over the head's).
func startAt(ctx context.Context, dir, ollama string) (started, error) {
	srv, err := engine.Start(ctx, engine.Spec{
		Command: []string{"bash", "{{.Workdir}}/inference_engine/serve.sh", "{{.Port}}"},
		Model:   demo.OllamaModel, ReadinessPath: "/api/version", StartTimeout: 2 * time.Minute, StopGrace: 10 * time.Second,
		Workdir: dir, Env: map[string]string{"OLLAMA_BIN": ollama},
	}, zerolog.Nop())
	if err != nil {
		return started{}, err
	}
	return started{url: srv.BaseURL(), pid: srv.PID(), logs: srv.Logs, stop: func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
	}}, nil
}
