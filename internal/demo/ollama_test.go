package demo

import (
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// TestOllamaRepoFiles checks what the real-engine repository holds, with
// no engine: its perfgate.yml (and the rates benchmark's) are valid, its
// models are GGUF files, and the slow pull request's model is the bigger
// one.
func TestOllamaRepoFiles(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{"demo": ollamaRepoConfig(""), "gates": ollamaGatesConfig(""), "cpu gates": ollamaCPUGatesConfig("")} {
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
	// #18 edits the README and turns on two knobs the CPU build ignores:
	// nothing else, so its engine runs as main's.
	env := l.docs["inference_engine/ollama.env"]
	if len(l.docs) != 2 || l.docs["model/README.md"] == "" || !strings.Contains(env, "OLLAMA_FLASH_ATTENTION=1\n") || !strings.Contains(env, "OLLAMA_KV_CACHE_TYPE=q8_0\n") ||
		strings.Replace(strings.Replace(env, "OLLAMA_FLASH_ATTENTION=1", "OLLAMA_FLASH_ATTENTION=0", 1), "OLLAMA_KV_CACHE_TYPE=q8_0", "OLLAMA_KV_CACHE_TYPE=f16", 1) != l.main["inference_engine/ollama.env"] {
		t.Errorf("the docs PR changes %v, want model/README.md and the two ignored knobs in ollama.env", l.docs)
	}
}
