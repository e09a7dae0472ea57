// Package ollama_test runs the demo's loop on a real engine, in a test
// binary of its own (its own timeout, beside the other packages' tests).
package ollama_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/demo"
)

// TestOllamaRealEngine runs the demo's loop on a real engine nobody here
// wrote: Ollama (llama.cpp inside) started by each commit's
// inference_engine/serve.sh, serving a small llama model made with
// perfgate gguf. Main is measured and promoted; PR #17 swaps in a deeper
// model and must warn with the table; PR #18 only edits a README and must
// pass (a green check, not a neutral "inconclusive") — measured, not
// simulated, on this shared two-core machine.
//
// It needs the ollama binary (demo.OllamaInstall; .ci/run installs it)
// and skips without it, except under CI where it must run.
func TestOllamaRealEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on a real engine: about two minutes of CPU")
	}
	ollama, err := demo.FindOllama()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the real-engine test: %v", err)
		}
		t.Skipf("no real engine here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var story strings.Builder
	out, err := demo.Run(ctx, demo.Options{Dir: t.TempDir(), Engine: demo.EngineOllama, Ollama: ollama,
		Log: zerolog.Nop(), Out: &story})
	if err != nil {
		t.Fatalf("%v\n%s", err, story.String())
	}
	t.Logf("%s", story.String())
	if out.Warning.Conclusion != "neutral" || !strings.Contains(out.Warning.Summary, "❌ regression") {
		t.Errorf("the deeper model: conclusion %q, want a neutral warning with a regression row\n%s", out.Warning.Conclusion, out.Warning.Summary)
	}
	// The docs-only PR runs main's engine and model: it passes, by the
	// equivalence test on the engine's CPU per output token (settling with
	// added pairs when the first ones leave it open).
	if out.Docs.Conclusion != "success" {
		t.Errorf("the docs-only PR: conclusion %q (%s), want success\n%s", out.Docs.Conclusion, out.Docs.Title, out.Docs.Summary)
	}
	t.Logf("docs-only PR: %s — %s", out.Docs.Conclusion, out.Docs.Title)
	// #18 also sets two knobs the CPU build ignores: the check says so
	// with Ollama's own warnings, on the check and on the changed lines.
	for _, want := range []string{
		"this change had no effect on the engine: `OLLAMA_FLASH_ATTENTION=1` (inference_engine/ollama.env:5) — the engine ran with flash_attn = `0` and warned: `flash attention enabled but not supported",
		"this change had no effect on the engine: `OLLAMA_KV_CACHE_TYPE=q8_0` (inference_engine/ollama.env:6) — the engine ran with type_k = `f16` and warned: `quantized kv cache requested but flash attention disabled",
	} {
		if !strings.Contains(out.Docs.Summary, want) {
			t.Errorf("the docs-and-ignored-knobs PR's check lacks %q:\n%s", want, out.Docs.Summary)
		}
	}
	if len(out.Docs.Annotations) != 2 || out.Docs.Annotations[0]["path"] != "inference_engine/ollama.env" || out.Docs.Annotations[0]["annotation_level"] != "warning" {
		t.Errorf("annotations %v, want two warnings on inference_engine/ollama.env", out.Docs.Annotations)
	}
	if strings.Contains(out.Warning.Summary, "no effect on the engine") {
		t.Errorf("the bigger model's check calls something a no-op:\n%s", out.Warning.Summary)
	}
	// The check names the engine as it names itself, its release read
	// from the binary (a go-installed Ollama answers 0.0.0).
	for name, c := range map[string]string{"the deeper model": out.Warning.Summary, "the docs-only PR": out.Docs.Summary} {
		if !strings.Contains(c, "| engine version | ollama v") {
			t.Errorf("%s: the check does not name the engine and its release:\n%s", name, c)
		}
	}
	if out.Escalated.Conclusion != "failure" {
		t.Errorf("48 hours later: conclusion %q, want failure", out.Escalated.Conclusion)
	}
	if out.Head.Commit != out.Repo.Slow || out.Baseline.Commit != out.Repo.Main || out.Head.Tree == out.Baseline.Tree {
		t.Errorf("measured head %s (tree %s) and base %s (tree %s), want the PR's and main's own trees",
			out.Head.Commit, out.Head.Tree, out.Baseline.Commit, out.Baseline.Tree)
	}
	if !strings.HasPrefix(out.Head.Identity, "ollama v") || !strings.Contains(out.Head.Engine, "serve.sh") {
		t.Errorf("engine identity %q, command %q: want ollama's version and the checkout's serve.sh", out.Head.Identity, out.Head.Engine)
	}
	if out.Head.CPUPerToken <= 1.3*out.Baseline.CPUPerToken {
		t.Errorf("the deeper model's engine CPU %.2f ms per output token is not well above main's %.2f ms", out.Head.CPUPerToken, out.Baseline.CPUPerToken)
	}
	if out.Head.TPOTMedian <= out.Baseline.TPOTMedian {
		t.Errorf("the deeper model's median TPOT %.2f ms is not above main's %.2f ms", out.Head.TPOTMedian, out.Baseline.TPOTMedian)
	}
}
