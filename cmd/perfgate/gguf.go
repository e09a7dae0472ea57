package main

import (
	"context"
	"fmt"
	"os"

	"github.com/perfgate/perfgate/internal/runner/gguf"
)

func init() {
	register("gguf", command{summary: "write a small llama-architecture GGUF model with random weights (for a real engine without downloads)", run: runGGUF})
}

// runGGUF writes a model that Ollama or llama.cpp loads (`ollama create NAME
// -f Modelfile` with `FROM ./model.gguf`): real attention, KV cache and
// sampling, nonsense tokens.
func runGGUF(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("gguf", "--out FILE [flags]")
	def := gguf.TinyLlama()
	out := fs.String("out", "", "the GGUF file to write (required)")
	layers := fs.Int("layers", def.Layers, "transformer blocks")
	width := fs.Int("width", def.Width, "embedding length (a multiple of 32)")
	heads := fs.Int("heads", def.Heads, "attention heads")
	kvHeads := fs.Int("kv-heads", def.KVHeads, "key/value heads (fewer than --heads: grouped-query attention)")
	ff := fs.Int("ff", def.FF, "feed-forward length (a multiple of 32)")
	ctxLen := fs.Int("context", def.Context, "context length")
	vocab := fs.Int("vocab", def.Vocab, "vocabulary size, at most (byte-level BPE: 256 bytes, merges, 2 specials)")
	typ := fs.String("type", "f16", "weight type of the matrices: f16, q8_0 or f32")
	seed := fs.Uint64("seed", def.Seed, "seed of the random weights")
	name := fs.String("name", def.Name, "general.name")
	fs.epilog = "Example:\n  perfgate gguf --out model/tiny.gguf && printf 'FROM ./tiny.gguf\\n' > model/Modelfile && ollama create tiny -f model/Modelfile\n"
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate gguf: unexpected arguments %q\n", fs.Args())
		return 3
	}
	if *out == "" {
		fmt.Fprintf(env.stderr, "perfgate gguf: --out is required: the file to write, e.g. --out model/tiny.gguf\n")
		return 3
	}
	m := gguf.Llama{Name: *name, Layers: *layers, Width: *width, Heads: *heads, KVHeads: *kvHeads, FF: *ff,
		Context: *ctxLen, Vocab: *vocab, Seed: *seed}
	switch *typ {
	case "f16":
		m.Type = gguf.F16
	case "q8_0":
		m.Type = gguf.Q8_0
	case "f32":
		m.Type = gguf.F32
	default:
		fmt.Fprintf(env.stderr, "perfgate gguf: --type %q: use f16, q8_0 or f32\n", *typ)
		return 3
	}
	if err := m.Validate(); err != nil {
		fmt.Fprintf(env.stderr, "perfgate gguf: %v\n", err)
		return 3
	}
	if err := m.WriteFile(*out); err != nil {
		fmt.Fprintf(env.stderr, "perfgate gguf: %v\n", err)
		return 1
	}
	st, err := os.Stat(*out)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate gguf: %v\n", err)
		return 1
	}
	vsize := len(gguf.ByteLevelBPE(m.Vocab).Tokens)
	fmt.Fprintf(env.stdout, "wrote %s: llama, %d layers, width %d, %d heads (%d kv), ff %d, vocab %d, %s, %.1f M parameters, %.1f MB\n",
		*out, m.Layers, m.Width, m.Heads, m.KVHeads, m.FF, vsize, m.Type, float64(m.Params(vsize))/1e6, float64(st.Size())/1e6)
	return 0
}
