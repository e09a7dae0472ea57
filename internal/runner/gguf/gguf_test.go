package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFloat16(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},                  // largest half
		{65520, 0x7c00},                  // rounds to infinity
		{float32(math.Inf(1)), 0x7c00},   // infinity
		{6.103515625e-05, 0x0400},        // smallest normal
		{5.960464477539063e-08, 0x0001},  // smallest subnormal
		{2.9802322387695312e-08, 0x0000}, // half of it: ties to even, zero
		{0.1, 0x2e66},
		{1.0009765625, 0x3c01},  // 1 + 2^-10 exactly
		{1.00048828125, 0x3c00}, // 1 + 2^-11: tie, to even
		{1.00146484375, 0x3c02}, // 1 + 3·2^-11: tie, to even (up)
	}
	for _, c := range cases {
		if got := Float16(c.in); got != c.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := Float16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("Float16(NaN) = %#04x, not a NaN", got)
	}
}

func TestQ8RoundTrip(t *testing.T) {
	t.Parallel()
	xs := make([]float32, 32)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i))) * 0.03
	}
	block := make([]byte, 34)
	encodeQ8(block, xs)
	d := half(binary.LittleEndian.Uint16(block[:2]))
	for i, x := range xs {
		got := d * float32(int8(block[2+i]))
		if math.Abs(float64(got-x)) > float64(d)*0.51+1e-6 {
			t.Errorf("value %d: %g decodes as %g (scale %g)", i, x, got, d)
		}
	}
}

// half decodes IEEE half bits (normal numbers), independently of Float16.
func half(h uint16) float32 {
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	v := math.Ldexp(1+mant/1024, exp-15)
	if exp == 0 {
		v = math.Ldexp(mant/1024, -14)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return float32(v)
}

func TestVocab(t *testing.T) {
	t.Parallel()
	v := ByteLevelBPE(512)
	if len(v.Tokens) != len(v.Types) {
		t.Fatalf("%d tokens but %d types", len(v.Tokens), len(v.Types))
	}
	if len(v.Tokens) < 300 || len(v.Tokens) > 512 {
		t.Fatalf("vocabulary of %d tokens, want 300–512", len(v.Tokens))
	}
	index := map[string]int{}
	for i, tok := range v.Tokens {
		if _, dup := index[tok]; dup {
			t.Fatalf("token %q twice", tok)
		}
		index[tok] = i
	}
	if index[" "] != 0 && index["Ġ"] == 0 {
		t.Errorf("a space is not spelled Ġ")
	}
	for _, m := range v.Merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			t.Fatalf("merge %q has no space", m)
		}
		for _, part := range []string{a, b, a + b} {
			if _, ok := index[part]; !ok {
				t.Fatalf("merge %q: %q is not a token", m, part)
			}
		}
	}
	if v.Tokens[v.EOS] != "<|eos|>" || v.Types[v.EOS] != tokenControl || v.Tokens[v.BOS] != "<|bos|>" {
		t.Errorf("specials: bos %d %q, eos %d %q", v.BOS, v.Tokens[v.BOS], v.EOS, v.Tokens[v.EOS])
	}
	again := ByteLevelBPE(512)
	if fmt.Sprint(again.Merges) != fmt.Sprint(v.Merges) {
		t.Errorf("training is not deterministic")
	}
}

// TestWriteParses reads a written model back with a reader written from
// the format's description, not from the writer: the header, every
// key-value pair, the tensor table, the alignment of every tensor and the
// file's length.
func TestWriteParses(t *testing.T) {
	t.Parallel()
	for _, typ := range []TensorType{F16, Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			t.Parallel()
			m := TinyLlama()
			m.Layers, m.Type = 2, typ
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := m.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f := parse(t, raw)
			if f.kv["general.architecture"] != "llama" || f.kv["llama.block_count"] != uint32(2) {
				t.Errorf("metadata: %v", f.kv)
			}
			tokens := f.kv["tokenizer.ggml.tokens"].([]string)
			if f.kv["llama.vocab_size"] != uint32(len(tokens)) {
				t.Errorf("vocab_size %v, %d tokens", f.kv["llama.vocab_size"], len(tokens))
			}
			if len(f.tensors) != 2*9+3 {
				t.Errorf("%d tensors, want %d", len(f.tensors), 2*9+3)
			}
			wantType := map[TensorType]uint32{F16: 1, Q8_0: 7}[typ]
			if f.kv["general.file_type"] != wantType {
				t.Errorf("file_type %v, want %d", f.kv["general.file_type"], wantType)
			}
			end := uint64(0)
			for _, ti := range f.tensors {
				if ti.offset%Alignment != 0 {
					t.Errorf("%s at offset %d, not aligned", ti.name, ti.offset)
				}
				n := uint64(1)
				for _, d := range ti.dims {
					n *= d
				}
				size := map[uint32]uint64{0: 4 * n, 1: 2 * n, 8: n / 32 * 34}[ti.typ]
				if ti.offset < end {
					t.Errorf("%s overlaps the tensor before it", ti.name)
				}
				end = ti.offset + size
			}
			if got := uint64(len(raw)) - f.dataStart; got < end || got > end+Alignment {
				t.Errorf("data section %d bytes, tensors need %d", got, end)
			}
		})
	}
}

// TestAnchor checks what keeps <|eos|>, <|bos|> and partial UTF-8 out of
// the output: the anchor dimension is 0.5 in every embedding, no layer
// writes to it, and only the suppressed tokens' output rows weigh it
// (negatively, and nothing else).
func TestAnchor(t *testing.T) {
	t.Parallel()
	m := TinyLlama()
	_, tensors, err := m.Build()
	if err != nil {
		t.Fatal(err)
	}
	v := ByteLevelBPE(m.Vocab)
	byName := map[string]Tensor{}
	for _, tt := range tensors {
		byName[tt.Name] = tt
	}
	w := m.Width
	embd, out := byName["token_embd.weight"], byName["output.weight"]
	for tok := 0; tok < len(v.Tokens); tok++ {
		if embd.Data[tok*w] != 0.5 {
			t.Fatalf("token %d: anchor %g", tok, embd.Data[tok*w])
		}
		want := float32(0)
		if v.Suppressed(tok) {
			want = -4
			for j := 1; j < w; j++ {
				if out.Data[tok*w+j] != 0 {
					t.Fatalf("suppressed row %d weighs dimension %d", tok, j)
				}
			}
		}
		if out.Data[tok*w] != want {
			t.Fatalf("output row %d weighs the anchor %g, want %g", tok, out.Data[tok*w], want)
		}
	}
	for _, tok := range []int{int(v.EOS), int(v.BOS), 0, '\n', 0x80, 0xff} {
		if !v.Suppressed(tok) {
			t.Errorf("token %d (%q) may be generated", tok, v.Tokens[tok])
		}
	}
	for _, tok := range []int{'a', ' ', 300} {
		if v.Suppressed(tok) {
			t.Errorf("token %d (%q) is suppressed", tok, v.Tokens[tok])
		}
	}
	for l := 0; l < m.Layers; l++ {
		for _, name := range []string{"attn_output", "ffn_down"} {
			tt := byName[fmt.Sprintf("blk.%d.%s.weight", l, name)]
			in := int(tt.Dims[0])
			for j := 0; j < in; j++ {
				if tt.Data[j] != 0 {
					t.Fatalf("%s writes to the anchor", tt.Name)
				}
			}
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	bad := []func(*Llama){
		func(m *Llama) { m.Width = 100 },
		func(m *Llama) { m.Heads = 3 },
		func(m *Llama) { m.KVHeads = 3 },
		func(m *Llama) { m.FF = 33 },
		func(m *Llama) { m.Layers = 0 },
		func(m *Llama) { m.Vocab = 10 },
		func(m *Llama) { m.Type = TensorType(2) },
	}
	for i, f := range bad {
		m := TinyLlama()
		f(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("case %d: %+v accepted", i, m)
		}
	}
	if err := TinyLlama().Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
}

type parsed struct {
	kv        map[string]any
	tensors   []tensorInfo
	dataStart uint64
}

type tensorInfo struct {
	name   string
	dims   []uint64
	typ    uint32
	offset uint64
}

func parse(t *testing.T, raw []byte) parsed {
	t.Helper()
	r := bytes.NewReader(raw)
	read := func(v any) {
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	str := func() string {
		var n uint64
		read(&n)
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("read string: %v", err)
		}
		return string(b)
	}
	var magic [4]byte
	read(&magic)
	var version uint32
	read(&version)
	if string(magic[:]) != "GGUF" || version != 3 {
		t.Fatalf("header %q v%d", magic, version)
	}
	var nt, nkv uint64
	read(&nt)
	read(&nkv)
	var value func(typ uint32) any
	value = func(typ uint32) any {
		switch typ {
		case 4:
			var v uint32
			read(&v)
			return v
		case 5:
			var v int32
			read(&v)
			return v
		case 6:
			var v float32
			read(&v)
			return v
		case 7:
			var v uint8
			read(&v)
			return v == 1
		case 8:
			return str()
		case 9:
			var et uint32
			var n uint64
			read(&et)
			read(&n)
			if et == 8 {
				out := make([]string, n)
				for i := range out {
					out[i] = str()
				}
				return out
			}
			out := make([]any, n)
			for i := range out {
				out[i] = value(et)
			}
			return out
		}
		t.Fatalf("value type %d", typ)
		return nil
	}
	p := parsed{kv: map[string]any{}}
	for i := uint64(0); i < nkv; i++ {
		k := str()
		var typ uint32
		read(&typ)
		p.kv[k] = value(typ)
	}
	for i := uint64(0); i < nt; i++ {
		ti := tensorInfo{name: str()}
		var nd uint32
		read(&nd)
		ti.dims = make([]uint64, nd)
		for j := range ti.dims {
			read(&ti.dims[j])
		}
		read(&ti.typ)
		read(&ti.offset)
		p.tensors = append(p.tensors, ti)
	}
	pos := uint64(len(raw)) - uint64(r.Len())
	p.dataStart = (pos + Alignment - 1) / Alignment * Alignment
	return p
}
