package gguf

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Llama describes a small llama-architecture model with random weights.
// The tokens it generates are nonsense; its attention, KV cache, batching
// and sampling are the engine's real ones, so its speed responds to the
// engine's knobs (threads, batch size, parallel slots, KV cache type) and
// to its own shape (width, layers) as a real model's does.
type Llama struct {
	Name    string
	Layers  int
	Width   int // embedding length; a multiple of 32 (q8_0 blocks)
	Heads   int
	KVHeads int // grouped-query attention when fewer than Heads
	FF      int // feed-forward length; a multiple of 32
	Context int // llama.context_length
	Vocab   int // target vocabulary size, specials included
	Type    TensorType
	Seed    uint64
}

// TinyLlama is the default: 4 layers of width 256, a 512-token byte-level
// BPE vocabulary, f16. About 4 M parameters: a 100-request run of 64-token
// outputs takes seconds on two CPU cores.
func TinyLlama() Llama {
	return Llama{Name: "perfgate-tiny", Layers: 4, Width: 256, Heads: 4, KVHeads: 4, FF: 768,
		Context: 4096, Vocab: 512, Type: F16, Seed: 1}
}

// Validate says what is wrong with the shape, if anything.
func (m Llama) Validate() error {
	switch {
	case m.Layers < 1 || m.Layers > 64:
		return fmt.Errorf("layers must be 1–64, got %d", m.Layers)
	case m.Width < 32 || m.Width%32 != 0:
		return fmt.Errorf("width must be a positive multiple of 32, got %d", m.Width)
	case m.Heads < 1 || m.Width%m.Heads != 0:
		return fmt.Errorf("heads must divide width %d, got %d", m.Width, m.Heads)
	case (m.Width/m.Heads)%2 != 0:
		return fmt.Errorf("head size width/heads must be even for RoPE, got %d", m.Width/m.Heads)
	case m.KVHeads < 1 || m.Heads%m.KVHeads != 0:
		return fmt.Errorf("kv heads must divide heads %d, got %d", m.Heads, m.KVHeads)
	case m.FF < 32 || m.FF%32 != 0:
		return fmt.Errorf("feed-forward length must be a positive multiple of 32, got %d", m.FF)
	case m.Context < 64:
		return fmt.Errorf("context must be at least 64, got %d", m.Context)
	case m.Vocab < 260:
		return fmt.Errorf("vocabulary must hold the 256 bytes and the specials (≥ 260), got %d", m.Vocab)
	case m.Type != F16 && m.Type != Q8_0 && m.Type != F32:
		return fmt.Errorf("type must be f16, q8_0 or f32, got %s", m.Type)
	}
	return nil
}

// Params is the number of weights.
func (m Llama) Params(vocab int) int {
	kv := m.Width / m.Heads * m.KVHeads
	perLayer := 2*m.Width*m.Width + 2*m.Width*kv + 3*m.Width*m.FF + 2*m.Width
	return m.Layers*perLayer + 2*vocab*m.Width + m.Width
}

// fileType is general.file_type (llama_ftype) for the matrices' type.
func (m Llama) fileType() uint32 {
	switch m.Type {
	case F32:
		return 0
	case Q8_0:
		return 7
	}
	return 1
}

// Build returns the model's metadata and tensors.
//
// One hidden dimension anchors the output: every token's embedding holds a
// constant 0.5 there, no layer writes to it, so after the final RMS norm it
// is always positive; the output rows of the tokens the model must never
// pick weigh it by −4 and nothing else. Those are the specials and the
// bytes that are not printable ASCII (Vocab.Suppressed). Random weights
// would otherwise end a stream whenever they pick <|eos|>, fall into a
// <|bos|> loop that streams nothing under greedy decoding, or emit half a
// UTF-8 sequence that the engine holds back: output lengths and chunk
// counts, which are not the engine's to choose, would add noise to every
// latency.
func (m Llama) Build() ([]KV, []Tensor, error) {
	if err := m.Validate(); err != nil {
		return nil, nil, err
	}
	v := ByteLevelBPE(m.Vocab)
	nv := len(v.Tokens)
	headDim := m.Width / m.Heads
	kvWidth := headDim * m.KVHeads
	rng := rand.New(rand.NewPCG(m.Seed, 0x9e3779b97f4a7c15))
	normal := func(n int, std float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * std)
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	// matrix is a [in, out] weight (ggml's ne0 = in) whose output 0 stays
	// zero when anchored, so no layer writes to the anchor dimension.
	matrix := func(in, out int, anchored bool) []float32 {
		w := normal(in*out, 0.02)
		if anchored {
			clear(w[:in])
		}
		return w
	}

	embd := normal(nv*m.Width, 0.05)
	for t := 0; t < nv; t++ {
		embd[t*m.Width] = 0.5
	}
	output := normal(nv*m.Width, 0.02)
	for t := 0; t < nv; t++ {
		output[t*m.Width] = 0
		if v.Suppressed(t) {
			row := output[t*m.Width : (t+1)*m.Width]
			clear(row)
			row[0] = -4
		}
	}

	w, ff, kvw := uint64(m.Width), uint64(m.FF), uint64(kvWidth)
	tensors := []Tensor{
		{Name: "token_embd.weight", Type: m.Type, Dims: []uint64{w, uint64(nv)}, Data: embd},
	}
	for l := 0; l < m.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		tensors = append(tensors,
			Tensor{Name: p + "attn_norm.weight", Type: F32, Dims: []uint64{w}, Data: ones(m.Width)},
			Tensor{Name: p + "attn_q.weight", Type: m.Type, Dims: []uint64{w, w}, Data: matrix(m.Width, m.Width, false)},
			Tensor{Name: p + "attn_k.weight", Type: m.Type, Dims: []uint64{w, kvw}, Data: matrix(m.Width, kvWidth, false)},
			Tensor{Name: p + "attn_v.weight", Type: m.Type, Dims: []uint64{w, kvw}, Data: matrix(m.Width, kvWidth, false)},
			Tensor{Name: p + "attn_output.weight", Type: m.Type, Dims: []uint64{w, w}, Data: matrix(m.Width, m.Width, true)},
			Tensor{Name: p + "ffn_norm.weight", Type: F32, Dims: []uint64{w}, Data: ones(m.Width)},
			Tensor{Name: p + "ffn_gate.weight", Type: m.Type, Dims: []uint64{w, ff}, Data: matrix(m.Width, m.FF, false)},
			Tensor{Name: p + "ffn_up.weight", Type: m.Type, Dims: []uint64{w, ff}, Data: matrix(m.Width, m.FF, false)},
			Tensor{Name: p + "ffn_down.weight", Type: m.Type, Dims: []uint64{ff, w}, Data: matrix(m.FF, m.Width, true)},
		)
	}
	tensors = append(tensors,
		Tensor{Name: "output_norm.weight", Type: F32, Dims: []uint64{w}, Data: ones(m.Width)},
		Tensor{Name: "output.weight", Type: m.Type, Dims: []uint64{w, uint64(nv)}, Data: output},
	)

	name := m.Name
	if name == "" {
		name = "perfgate-tiny"
	}
	kvs := []KV{
		{"general.architecture", "llama"},
		{"general.name", name},
		{"general.file_type", m.fileType()},
		{"general.alignment", uint32(Alignment)},
		{"llama.context_length", uint32(m.Context)},
		{"llama.embedding_length", uint32(m.Width)},
		{"llama.block_count", uint32(m.Layers)},
		{"llama.feed_forward_length", uint32(m.FF)},
		{"llama.attention.head_count", uint32(m.Heads)},
		{"llama.attention.head_count_kv", uint32(m.KVHeads)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.vocab_size", uint32(nv)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.merges", v.Merges},
		{"tokenizer.ggml.bos_token_id", v.BOS},
		{"tokenizer.ggml.eos_token_id", v.EOS},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
	return kvs, tensors, nil
}

// WriteFile writes the model to path, through a temporary file renamed into
// place, so a reader never sees half a model.
func (m Llama) WriteFile(path string) error {
	kvs, tensors, err := m.Build()
	if err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gguf-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, kvs, tensors); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
