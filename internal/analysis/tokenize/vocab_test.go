package tokenize

import (
	"strings"
	"testing"
)

func TestDecodeEncodeRoundTripsEveryID(t *testing.T) {
	t.Parallel()
	ids := make([]int, VocabSize)
	for i := range ids {
		ids[i] = i
	}
	text, err := Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	if n := Count(text); n != VocabSize {
		t.Fatalf("decoded text has %d words for %d ids", n, VocabSize)
	}
	got := Encode(nil, text)
	for i, id := range got {
		if int(id) != i {
			t.Fatalf("id %d (%q) encodes back as %d", i, Word(i), id)
		}
	}
}

func TestEncode(t *testing.T) {
	t.Parallel()
	out := strings.Join(Output, " ")
	ids := Encode(nil, "  "+out+"\n")
	if len(ids) != len(Output) {
		t.Fatalf("%d ids for %d words", len(ids), len(Output))
	}
	for i, id := range ids {
		if id != OutputID(i) || Word(int(id)) != Output[i] {
			t.Errorf("word %d %q: id %d, OutputID %d", i, Output[i], id, OutputID(i))
		}
		if OutputID(i+len(Output)) != OutputID(i) {
			t.Errorf("OutputID is not periodic at %d", i)
		}
	}
	a := Encode(nil, "zebra-crossing unknown")
	b := Encode(nil, "zebra-crossing\tunknown")
	if len(a) != 2 || a[0] != b[0] || a[1] != b[1] {
		t.Errorf("unknown words: %v vs %v", a, b)
	}
	for _, id := range a {
		if id < 0 || id >= VocabSize {
			t.Errorf("unknown word id %d out of range", id)
		}
	}
	if got := Encode([]int32{7}, ""); len(got) != 1 {
		t.Errorf("empty text appended %v", got)
	}
}

func TestDecodeRejectsOutOfVocabulary(t *testing.T) {
	t.Parallel()
	for _, ids := range [][]int{{-1}, {1, VocabSize}} {
		if _, err := Decode(ids); err == nil || !strings.Contains(err.Error(), "out of vocabulary") {
			t.Errorf("Decode(%v) error %v", ids, err)
		}
	}
	if s, err := Decode(nil); err != nil || s != "" {
		t.Errorf("Decode(nil) = %q, %v", s, err)
	}
}

func TestSyllableWordsAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for n := range 20000 {
		w := syllableWord(n)
		if prev, dup := seen[w]; dup {
			t.Fatalf("syllableWord(%d) = syllableWord(%d) = %q", n, prev, w)
		}
		seen[w] = n
	}
}
