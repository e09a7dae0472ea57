package gguf

import (
	"sort"
	"strings"
)

// Vocab is a byte-level BPE vocabulary in GPT-2's form: every byte is a
// token (spelled with GPT-2's byte-to-unicode table, so a space is "Ġ"),
// merges combine adjacent tokens, and the special tokens come last.
type Vocab struct {
	Tokens []string
	Types  []int32 // 1 normal, 3 control
	Merges []string
	BOS    uint32
	EOS    uint32
}

// Token types (llama_token_type).
const (
	tokenNormal  int32 = 1
	tokenControl int32 = 3
)

// corpus trains the merges: plain English of the kind perfgate's random
// and ShareGPT-like prompts are made of. Any text would do; the model's
// weights are random, so the tokens only need to be a real BPE
// vocabulary that a real tokenizer runs.
const corpus = `the quick brown fox jumps over the lazy dog while the model serves
requests from many users at once and the scheduler batches their tokens into
steps so that the throughput of the engine stays high and the latency of each
request stays low. a regression in the time to first token or the time per
output token costs money because more machines are needed for the same
traffic. performance is measured on every pull request, compared with the
base branch, and the result is reported on the check run with a table of the
metrics that changed and the noise that was measured on the same card. the
runner starts the engine from the commit, warms it up, sends the prompts, and
records what it saw. when the change is larger than the threshold and larger
than the noise, the gate warns the author, and after two days it blocks the
merge until a maintainer decides. there is an answer in the data when the
data is good, and there is none when the machine is busy or the engine is
cold. tell me about the history of the city, what people ate there, which
songs they sang, how the rivers changed, where the roads went, and why the
old bridge was built from stone and not from wood. write a short story about
a cat who learns to read, then a poem about the sea, then a list of ten
questions a student could ask about physics, chemistry and biology.`

// ByteLevelBPE makes a vocabulary of about size tokens: 256 byte tokens,
// merges learned from a fixed English corpus, and <|bos|>, <|eos|>. The
// result is deterministic. Fewer merges are made when the corpus runs out
// of pairs that occur twice.
func ByteLevelBPE(size int) Vocab {
	enc := byteEncoder()
	var v Vocab
	seen := map[string]bool{}
	for b := 0; b < 256; b++ {
		t := enc[byte(b)]
		v.Tokens = append(v.Tokens, t)
		v.Types = append(v.Types, tokenNormal)
		seen[t] = true
	}
	words := pretokenize(corpus, enc)
	for len(v.Tokens) < size-2 {
		pair, ok := mostFrequentPair(words)
		if !ok {
			break
		}
		merged := pair[0] + pair[1]
		v.Merges = append(v.Merges, pair[0]+" "+pair[1])
		if !seen[merged] {
			seen[merged] = true
			v.Tokens = append(v.Tokens, merged)
			v.Types = append(v.Types, tokenNormal)
		}
		for i := range words {
			words[i].syms = mergeSyms(words[i].syms, pair)
		}
	}
	v.BOS = uint32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|bos|>")
	v.Types = append(v.Types, tokenControl)
	v.EOS = uint32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|eos|>")
	v.Types = append(v.Types, tokenControl)
	return v
}

// Suppressed says whether token t is one a generating model must never
// pick: a special, or a single byte outside printable ASCII (a control
// character, or a piece of a UTF-8 sequence that engines hold back until
// it completes, streaming nothing).
func (v Vocab) Suppressed(t int) bool {
	if v.Types[t] != tokenNormal {
		return true
	}
	return t < 256 && (t < 0x20 || t >= 0x7f) // tokens 0–255 are the bytes
}

// byteEncoder is GPT-2's bytes_to_unicode: printable bytes stand for
// themselves, the others are shifted to code points from 256 up.
func byteEncoder() map[byte]string {
	enc := make(map[byte]string, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			enc[byte(b)] = string(rune(b))
			continue
		}
		enc[byte(b)] = string(rune(256 + n))
		n++
	}
	return enc
}

type word struct {
	syms  []string
	count int
}

// pretokenize splits text at spaces, GPT-2 style (a word carries its
// leading space), spelling each byte with enc, and counts repeats.
func pretokenize(text string, enc map[byte]string) []word {
	counts := map[string]int{}
	var order []string
	for i, f := range strings.Fields(text) {
		if i > 0 {
			f = " " + f
		}
		if counts[f] == 0 {
			order = append(order, f)
		}
		counts[f]++
	}
	words := make([]word, 0, len(order))
	for _, f := range order {
		syms := make([]string, 0, len(f))
		for i := 0; i < len(f); i++ {
			syms = append(syms, enc[f[i]])
		}
		words = append(words, word{syms: syms, count: counts[f]})
	}
	return words
}

// mostFrequentPair is the adjacent pair seen most often (at least twice);
// ties go to the pair that sorts first, so training is deterministic.
func mostFrequentPair(words []word) ([2]string, bool) {
	counts := map[[2]string]int{}
	for _, w := range words {
		for i := 0; i+1 < len(w.syms); i++ {
			counts[[2]string{w.syms[i], w.syms[i+1]}] += w.count
		}
	}
	pairs := make([][2]string, 0, len(counts))
	for p, c := range counts {
		if c >= 2 {
			pairs = append(pairs, p)
		}
	}
	if len(pairs) == 0 {
		return [2]string{}, false
	}
	sort.Slice(pairs, func(i, j int) bool {
		ci, cj := counts[pairs[i]], counts[pairs[j]]
		if ci != cj {
			return ci > cj
		}
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	return pairs[0], true
}

func mergeSyms(syms []string, pair [2]string) []string {
	out := syms[:0:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == pair[0] && syms[i+1] == pair[1] {
			out = append(out, pair[0]+pair[1])
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}
