package demo

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/config"
)

// TestOllamaRealEngine runs the demo's loop on a real engine nobody here
// wrote: Ollama (llama.cpp inside) started by each commit's
// inference_engine/serve.sh, serving a small llama model made with
// perfgate gguf. Main is measured and promoted; PR #17 swaps in a deeper
// model and must warn with the table; PR #18 only edits a README and must
// pass — measured, not simulated.
//
// It needs the ollama binary (demo.OllamaInstall; .ci/run installs it)
// and skips without it, except under CI where it must run.
func TestOllamaRealEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on a real engine: about two minutes of CPU")
	}
	ollama, err := FindOllama()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the real-engine test: %v", err)
		}
		t.Skipf("no real engine here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var story strings.Builder
	out, err := Run(ctx, Options{Dir: t.TempDir(), Engine: EngineOllama, Ollama: ollama, Perfgate: perfgateBin,
		Log: zerolog.Nop(), Out: &story})
	if err != nil {
		t.Fatalf("%v\n%s", err, story.String())
	}
	t.Logf("%s", story.String())
	if out.Warning.Conclusion != "neutral" || !strings.Contains(out.Warning.Summary, "❌ regression") {
		t.Errorf("the deeper model: conclusion %q, want a neutral warning with a regression row\n%s", out.Warning.Conclusion, out.Warning.Summary)
	}
	if out.Docs.Conclusion != "success" {
		t.Errorf("the docs-only PR: conclusion %q, want success\n%s", out.Docs.Conclusion, out.Docs.Summary)
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
	if out.Head.TPOTMedian <= out.Baseline.TPOTMedian {
		t.Errorf("the deeper model's median TPOT %.2f ms is not above main's %.2f ms", out.Head.TPOTMedian, out.Baseline.TPOTMedian)
	}
}

// TestOllamaRepoFiles checks what the real-engine repository holds, with
// no engine: its perfgate.yml (and the rates benchmark's) are valid, its
// models are GGUF files, and the slow pull request's model is the bigger
// one.
func TestOllamaRepoFiles(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{"demo": ollamaRepoConfig(""), "gates": ollamaGatesConfig("")} {
		if _, err := config.Parse(config.DefaultPath, []byte(body)); err != nil {
			t.Errorf("%s config: %v\n%s", name, err, body)
		}
	}
	l, err := ollamaLayout()
	if err != nil {
		t.Fatal(err)
	}
	base, slow := l.main["model/perfgate-tiny.gguf"], l.slow["model/perfgate-tiny.gguf"]
	if !strings.HasPrefix(base, "GGUF") || !strings.HasPrefix(slow, "GGUF") || len(slow) < 2*len(base) {
		t.Errorf("models: main %d bytes, slow PR %d bytes", len(base), len(slow))
	}
	if !strings.Contains(l.main["model/Modelfile"], "FROM ./perfgate-tiny.gguf") || !strings.Contains(l.main["inference_engine/serve.sh"], `"$ollama" serve`) {
		t.Errorf("Modelfile or serve.sh lacks the model or the server")
	}
	if len(l.docs) != 1 || l.docs["model/README.md"] == "" {
		t.Errorf("the docs PR changes %v, want only model/README.md", l.docs)
	}
}
