package bench

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
)

// counterFunc counts with a function, and counts its calls.
type counterFunc struct {
	f     func(string) int
	calls *atomic.Int64
}

func (c counterFunc) count(_ context.Context, text string) (int, error) {
	c.calls.Add(1)
	return c.f(text), nil
}

// Testing the vocabulary in groups keeps exactly the words a word-by-word
// test keeps, in far fewer calls.
func TestSingleTokenWordsInGroups(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	tok := counterFunc{f: fakeCount, calls: &calls}
	got, err := singleTokenWords(context.Background(), tok, -1)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, w := range words {
		if fakeCount(" "+w) == 1 {
			want = append(want, w)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %d words, want the %d a word-by-word test keeps", len(got), len(want))
	}
	if n := calls.Load(); n >= int64(len(words))/2 {
		t.Errorf("%d calls for %d words: the groups were not used", n, len(words))
	}
	t.Logf("%d calls for %d words (%d kept)", calls.Load(), len(words), len(got))

	// A tokenizer that reads every word as one token: no call at all
	// beyond the whole vocabulary's count, which the caller made.
	calls.Store(0)
	got, _ = singleTokenWords(context.Background(), counterFunc{f: func(s string) int { return len(words) }, calls: &calls}, len(words))
	if len(got) != len(words) || calls.Load() != 0 {
		t.Errorf("all single: kept %d, %d calls; want %d and 0", len(got), calls.Load(), len(words))
	}
}

// A benchmark repeated in one process against the same engine counts its
// prompts once: the second run asks /tokenize only to recognise the
// tokenizer, and sends the same prompts.
func TestCalibrationCachedAcrossRuns(t *testing.T) {
	t.Parallel()
	f := &fakeVLLM{usage: true, tokenize: true}
	url := f.start(t)
	run := func() (string, int) {
		f.mu.Lock()
		before := f.tokenized
		f.mu.Unlock()
		r, err := Run(context.Background(), Options{Target: url, Model: f.model, NumPrompts: 20, InputLen: 24, OutputLen: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return r.Perfgate.DatasetHash, f.tokenized - before
	}
	hash1, calls1 := run()
	hash2, calls2 := run()
	if hash1 != hash2 {
		t.Errorf("the second run sent other prompts: %s vs %s", hash2, hash1)
	}
	// Detection and the fingerprint: two calls, however many prompts.
	if calls2 != 2 || calls1 <= calls2 {
		t.Errorf("/tokenize calls: first run %d, second %d; want the second to make 2", calls1, calls2)
	}
	t.Logf("/tokenize calls: first run %d, second %d", calls1, calls2)
}
