package tokenize

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"unicode"
)

// VocabSize is the number of token ids the rule knows: ids 0..VocabSize-1
// each stand for one word, so Decode then Encode gives back the same ids and
// Count of a decoded text equals the number of ids. It is the size of a
// Llama-2-style vocabulary, enough for prompts that look varied.
const VocabSize = 32000

// Output is the word sequence the simulated engine generates: output token i
// is Output[i%len(Output)]. Its words are the first ids of the vocabulary.
var Output = strings.Fields(`the quick brown fox jumps over a lazy dog while
	seven bright engines hum along the river and every batch of tokens
	streams out in order to the waiting clients who measure each gap`)

// vocab is the id ↔ word table, built on first use: the distinct words of
// Output first, then made-up consonant-vowel words ("ka", "rimo", …) that
// read like text and never collide with an earlier word.
type vocab struct {
	words []string
	ids   map[string]int32
	out   []int32 // Output[i]'s id
}

var (
	vocabOnce sync.Once
	table     *vocab
)

func loadVocab() *vocab {
	vocabOnce.Do(func() {
		v := &vocab{words: make([]string, 0, VocabSize), ids: make(map[string]int32, VocabSize)}
		add := func(w string) {
			if _, dup := v.ids[w]; !dup {
				v.ids[w] = int32(len(v.words))
				v.words = append(v.words, w)
			}
		}
		for _, w := range Output {
			add(w)
		}
		for n := 0; len(v.words) < VocabSize; n++ {
			add(syllableWord(n))
		}
		v.out = make([]int32, len(Output))
		for i, w := range Output {
			v.out[i] = v.ids[w]
		}
		table = v
	})
	return table
}

const (
	consonants = "bdfghklmnprstvz"
	vowels     = "aeiou"
)

// syllableWord writes n in bijective base len(consonants)*len(vowels), one
// consonant-vowel syllable per digit, so every n gives a distinct word.
func syllableWord(n int) string {
	const base = len(consonants) * len(vowels)
	var b []byte
	for n++; n > 0; n = (n - 1) / base {
		d := (n - 1) % base
		b = append(b, consonants[d/len(vowels)], vowels[d%len(vowels)])
	}
	return string(b)
}

// Encode appends the id of each whitespace-separated word of s to dst. A
// word outside the vocabulary gets a stable id from its hash, as a real
// tokenizer maps rare text to some token: the count is exact, the ids of
// unknown words do not decode back to them.
func Encode(dst []int32, s string) []int32 {
	v := loadVocab()
	start := -1
	for i, r := range s {
		if unicode.IsSpace(r) {
			if start >= 0 {
				dst = append(dst, v.id(s[start:i]))
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = append(dst, v.id(s[start:]))
	}
	return dst
}

func (v *vocab) id(w string) int32 {
	if id, ok := v.ids[w]; ok {
		return id
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(w)) // hash.Hash.Write never fails
	return int32(h.Sum32() % VocabSize)
}

// Decode returns the words of ids separated by single spaces; an id outside
// 0..VocabSize-1 is an error.
func Decode(ids []int) (string, error) {
	v := loadVocab()
	var b strings.Builder
	for i, id := range ids {
		if id < 0 || id >= VocabSize {
			return "", fmt.Errorf("token id %d at position %d is out of vocabulary (0..%d)", id, i, VocabSize-1)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.words[id])
	}
	return b.String(), nil
}

// Word returns the word of id, which must be in 0..VocabSize-1.
func Word(id int) string { return loadVocab().words[id] }

// OutputID returns the token id of output token i (Output[i%len(Output)]).
func OutputID(i int) int32 {
	v := loadVocab()
	return v.out[i%len(v.out)]
}
