package bench

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

const (
	shareGPTFixture = "../../../testdata/datasets/sharegpt_small.json"
	jsonlFixture    = "../../../testdata/datasets/prompts.jsonl"
)

func samples(t *testing.T, o Options) (measured, warmup []sample) {
	t.Helper()
	o.Target = "http://x"
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	d, err := loadSamples(context.Background(), &o, rand.New(rand.NewPCG(uint64(o.Seed), 1)), promptTokens{})
	m, w := d.measured, d.warmup
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

func TestRandomDataset(t *testing.T) {
	m, w := samples(t, Options{NumPrompts: 20, Warmup: 5, InputLen: 37, OutputLen: 9, Seed: 3})
	if len(m) != 20 || len(w) != 5 {
		t.Fatalf("%d measured, %d warmup", len(m), len(w))
	}
	seen := map[string]bool{}
	for _, s := range append(m, w...) {
		if n := tokenize.Count(s.prompt); n != 37 || s.promptLen != 37 {
			t.Errorf("prompt has %d tokens (recorded %d), want 37", n, s.promptLen)
		}
		if s.maxTokens != 9 {
			t.Errorf("max_tokens %d, want 9", s.maxTokens)
		}
		if seen[s.prompt] {
			t.Errorf("duplicate prompt")
		}
		seen[s.prompt] = true
	}
	again, _ := samples(t, Options{NumPrompts: 20, InputLen: 37, OutputLen: 9, Seed: 3})
	other, _ := samples(t, Options{NumPrompts: 20, InputLen: 37, OutputLen: 9, Seed: 4})
	if datasetHash(again) != datasetHash(m) {
		t.Error("same seed, different prompts (or warmup changed the measured set)")
	}
	if datasetHash(other) == datasetHash(m) {
		t.Error("different seeds gave the same prompts")
	}
}

func TestShareGPTDataset(t *testing.T) {
	m, _ := samples(t, Options{Dataset: "sharegpt", DatasetPath: shareGPTFixture, NumPrompts: 8, Seed: 1})
	// Of 7 conversations, "Hi" (prompt < 4 words), the one-word reply and
	// the single-turn one are skipped: 4 remain, drawn twice over.
	distinct := map[string]int{}
	for _, s := range m {
		distinct[s.prompt] = s.maxTokens
		if s.prompt == "Hi" || strings.HasPrefix(s.prompt, "What is the capital") || strings.HasPrefix(s.prompt, "A conversation") {
			t.Errorf("should have been skipped: %q", s.prompt)
		}
	}
	if len(distinct) != 4 {
		t.Errorf("%d distinct prompts, want 4: %v", len(distinct), distinct)
	}
	if got := distinct["Write a haiku about autumn rain on a tin roof."]; got != 15 {
		t.Errorf("haiku max_tokens = %d, want 15 (words in the gpt turn)", got)
	}
	// A fixed output length keeps the short-reply conversation.
	m, _ = samples(t, Options{Dataset: "sharegpt", DatasetPath: shareGPTFixture, NumPrompts: 5, OutputLen: 10})
	distinct = map[string]int{}
	for _, s := range m {
		distinct[s.prompt] = s.maxTokens
	}
	if len(distinct) != 5 || distinct["What is the capital city of Australia and why?"] != 10 {
		t.Errorf("with --output-len 10: %v", distinct)
	}
}

func TestJSONLDataset(t *testing.T) {
	m, w := samples(t, Options{Dataset: "jsonl", DatasetPath: jsonlFixture, NumPrompts: 4, Warmup: 1, Seed: 2})
	got := map[string]int{}
	for _, s := range m {
		got[s.prompt] = s.maxTokens
		if s.promptLen != tokenize.Count(s.prompt) {
			t.Errorf("promptLen %d for %q", s.promptLen, s.prompt)
		}
	}
	if len(got) != 4 || got["Count from one to five."] != 5 || got["Translate good morning into French."] != 8 {
		t.Errorf("jsonl samples %v", got)
	}
	if len(w) != 1 {
		t.Errorf("%d warmup samples", len(w))
	}
}

func TestDatasetErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, dataset, path, want string
	}{
		{"missing file", "jsonl", filepath.Join(dir, "none.jsonl"), "no such file"},
		{"bad json line", "jsonl", write("bad.jsonl", "{\"prompt\":\"a\",\"output_len\":3}\nnot json\n"), "line 2"},
		{"no output_len", "jsonl", write("nolen.jsonl", `{"prompt":"a b c"}`), "--output-len"},
		{"no prompt", "jsonl", write("noprompt.jsonl", `{"output_len":3}`), `no "prompt"`},
		{"sharegpt not an array", "sharegpt", write("obj.json", `{"a":1}`), "parse sharegpt"},
		{"sharegpt nothing usable", "sharegpt", write("short.json", `[{"conversations":[{"value":"hi"},{"value":"yo"}]}]`), "no usable"},
	}
	for _, tt := range tests {
		o := Options{Target: "http://x", Dataset: tt.dataset, DatasetPath: tt.path, NumPrompts: 2}
		if err := o.normalize(); err != nil {
			t.Fatal(err)
		}
		_, err := loadSamples(context.Background(), &o, rand.New(rand.NewPCG(1, 1)), promptTokens{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestDatasetHash(t *testing.T) {
	a := []sample{{prompt: "a b", maxTokens: 3}, {prompt: "c", maxTokens: 4}}
	for name, b := range map[string][]sample{
		"max_tokens":  {{prompt: "a b", maxTokens: 3}, {prompt: "c", maxTokens: 5}},
		"prompt":      {{prompt: "a c", maxTokens: 3}, {prompt: "c", maxTokens: 4}},
		"order":       {{prompt: "c", maxTokens: 4}, {prompt: "a b", maxTokens: 3}},
		"boundary":    {{prompt: "a", maxTokens: 3}, {prompt: "b c", maxTokens: 4}},
		"one missing": {{prompt: "a b", maxTokens: 3}},
	} {
		if datasetHash(a) == datasetHash(b) {
			t.Errorf("changing the %s kept the hash", name)
		}
	}
	if datasetHash(a) != datasetHash([]sample{{prompt: "a b", maxTokens: 3, promptLen: 9}, {prompt: "c", maxTokens: 4}}) {
		t.Error("hash depends on more than prompts and max_tokens")
	}
}
