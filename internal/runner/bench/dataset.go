package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// sample is one prompt of a dataset with the output length to ask for.
type sample struct {
	prompt    string
	promptLen int // tokens: the server's count when it has /tokenize, else words
	maxTokens int
	// offset is when a replayed trace sends the request, from the start of
	// the measured phase; hasOffset marks trace samples.
	offset    time.Duration
	hasOffset bool
	// A traffic shape's draws (traffic.go): the model to name ("" the
	// run's), the prompt class, and a chat session's conversation so far
	// (the chat endpoint sends it as messages; prompt is its text).
	model    string
	class    string
	messages []chatMessage
}

// ShareGPT filters, as vLLM's is_valid_sequence applies them by default.
const (
	shareGPTMinLen       = 4
	shareGPTMaxPromptLen = 1024
	shareGPTMaxTotalLen  = 2048
)

// promptTokens says how prompts are measured: with the server's tokenizer
// (tok, and vocab: the words it reads as one token each), or in words
// when tok is nil; maxModelLen is the model's context (0: unknown), which
// a trace's rows are fitted to.
type promptTokens struct {
	tok         counter
	vocab       []string
	maxModelLen int
}

// dataset is what loadSamples made: the measured samples, the warm-up
// ones, and for a trace the rows that did not fit the model's context.
type dataset struct {
	measured, warmup []sample
	overlong         overlong
}

// loadSamples returns n measured samples followed by warmup samples. The
// measured ones come first and do not depend on warmup, so the dataset
// hash of a run is the same whatever its warmup count.
func loadSamples(ctx context.Context, o *Options, rng *rand.Rand, p promptTokens) (dataset, error) {
	if p.vocab == nil {
		p.vocab = words
	}
	if isTrace(o.Dataset) {
		return loadTrace(ctx, o, p)
	}
	var err error
	total := o.NumPrompts + o.Warmup
	var all []sample
	if t := o.Traffic; t != nil && (t.Sessions != nil || len(t.PromptMix) > 0) {
		measured, err := shapedSamples(ctx, o, p)
		if err != nil {
			return dataset{}, err
		}
		assignModels(measured, o)
		// The warm-up stays plain: it fills the engine, not its cache.
		warmup := randomSamples(o.Warmup, o.InputLen, o.OutputLen, rng, p.vocab)
		if err := recount(ctx, warmup, p.tok); err != nil {
			return dataset{}, fmt.Errorf("measure prompts with the server's tokenizer: %w", err)
		}
		return dataset{measured: measured, warmup: warmup}, nil
	}
	defer func() { assignModels(all[:min(o.NumPrompts, len(all))], o) }()
	switch o.Dataset {
	case "random":
		all = randomSamples(total, o.InputLen, o.OutputLen, rng, p.vocab)
		if p.tok != nil {
			err = parallel(ctx, len(all), func(i int) error {
				more := wordsFrom(p.vocab, rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)^0xf17_f17)))
				text, n, err := fitPrompt(ctx, p.tok, strings.Fields(all[i].prompt), o.InputLen, more)
				all[i].prompt, all[i].promptLen = text, n
				return err
			})
		}
	case "sharegpt":
		var pool []sample
		if pool, err = readShareGPT(o.DatasetPath, o.OutputLen); err != nil {
			return dataset{}, err
		}
		all = pick(pool, total, rng)
		err = recount(ctx, all, p.tok)
	case "jsonl":
		var pool []sample
		if pool, err = readJSONL(o.DatasetPath, o.OutputLen); err != nil {
			return dataset{}, err
		}
		all = pick(pool, total, rng)
		err = recount(ctx, all, p.tok)
	default:
		return dataset{}, fmt.Errorf("dataset %q: want random, sharegpt, jsonl or a trace", o.Dataset)
	}
	if err != nil {
		return dataset{}, fmt.Errorf("measure prompts with the server's tokenizer: %w", err)
	}
	return dataset{measured: all[:o.NumPrompts], warmup: all[o.NumPrompts:]}, nil
}

// recount measures each distinct prompt with the server's tokenizer.
func recount(ctx context.Context, all []sample, tok counter) error {
	if tok == nil {
		return nil
	}
	idx := map[string][]int{}
	var order []string
	for i := range all {
		if _, seen := idx[all[i].prompt]; !seen {
			order = append(order, all[i].prompt)
		}
		idx[all[i].prompt] = append(idx[all[i].prompt], i)
	}
	counts := make([]int, len(order))
	err := parallel(ctx, len(order), func(i int) error {
		n, err := tok.count(ctx, order[i])
		counts[i] = n
		return err
	})
	if err != nil {
		return err
	}
	for i, prompt := range order {
		for _, j := range idx[prompt] {
			all[j].promptLen = counts[i]
		}
	}
	return nil
}

// words is the random dataset's vocabulary: one token each under the
// shared whitespace rule, whatever the engine.
var words = strings.Fields(`the of and to in is was that for on with as by at from his her
an be this which or are had not but have one they you were all their there been has when who
more will would no if out so said what up its about into than them can only other new some
could time these two may then do first any my now such like our over man me even most made
after also did many before must through back years where much your way well down should
because each just those people how too little state good very make world still own see men
work long get here between both life being under never day same another know while last might
us great old year off come since against go came right used take three`)

// randomSamples makes n prompts of exactly inputLen random words.
func randomSamples(n, inputLen, outputLen int, rng *rand.Rand, vocab []string) []sample {
	out := make([]sample, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		for w := 0; w < inputLen; w++ {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[rng.IntN(len(vocab))])
		}
		out[i] = sample{prompt: b.String(), promptLen: inputLen, maxTokens: outputLen}
	}
	return out
}

// pick draws n samples: a seeded shuffle taken in order, wrapping around
// (and so repeating prompts) when the pool is smaller than n, as vLLM
// oversamples.
func pick(pool []sample, n int, rng *rand.Rand) []sample {
	idx := rng.Perm(len(pool))
	out := make([]sample, n)
	for i := range out {
		out[i] = pool[idx[i%len(idx)]]
	}
	return out
}

// shareGPTEntry is one conversation of the ShareGPT JSON.
type shareGPTEntry struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// readShareGPT takes each conversation's first turn as the prompt and, unless
// outputLen fixes it, the second turn's token count as the output length.
// Too short or too long pairs are skipped, with vLLM's default limits.
func readShareGPT(path string, outputLen int) ([]sample, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read sharegpt dataset: %w", err)
	}
	var entries []shareGPTEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("parse sharegpt dataset %s: %w", path, err)
	}
	var pool []sample
	for _, e := range entries {
		if len(e.Conversations) < 2 {
			continue
		}
		prompt := e.Conversations[0].Value
		pl := tokenize.Count(prompt)
		ol := tokenize.Count(e.Conversations[1].Value)
		if outputLen > 0 {
			ol = outputLen
		}
		if pl < shareGPTMinLen || (outputLen == 0 && ol < shareGPTMinLen) {
			continue
		}
		if pl > shareGPTMaxPromptLen || pl+ol > shareGPTMaxTotalLen {
			continue
		}
		pool = append(pool, sample{prompt: prompt, promptLen: pl, maxTokens: ol})
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("sharegpt dataset %s: no usable conversations (each needs a prompt and a reply of at least %d words)", path, shareGPTMinLen)
	}
	return pool, nil
}

// readJSONL reads one {"prompt": "...", "output_len": N} object per line;
// outputLen, when set, overrides every line's output_len.
func readJSONL(path string, outputLen int) ([]sample, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read jsonl dataset: %w", err)
	}
	var pool []sample
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var v struct {
			Prompt    *string `json:"prompt"`
			OutputLen int     `json:"output_len"`
		}
		if err := json.Unmarshal(text, &v); err != nil {
			return nil, fmt.Errorf("jsonl dataset %s line %d: %w", path, line, err)
		}
		if v.Prompt == nil || strings.TrimSpace(*v.Prompt) == "" {
			return nil, fmt.Errorf("jsonl dataset %s line %d: no \"prompt\"", path, line)
		}
		ol := v.OutputLen
		if outputLen > 0 {
			ol = outputLen
		}
		if ol <= 0 {
			return nil, fmt.Errorf("jsonl dataset %s line %d: no positive \"output_len\"; add one or pass --output-len", path, line)
		}
		pool = append(pool, sample{prompt: *v.Prompt, promptLen: tokenize.Count(*v.Prompt), maxTokens: ol})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read jsonl dataset %s: %w", path, err)
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("jsonl dataset %s: no prompts", path)
	}
	return pool, nil
}

// datasetHash is sha256 over the prompts and max_tokens actually sent (and
// a trace's send times), in order: two runs with the same hash offered the
// same work.
func datasetHash(samples []sample) string {
	h := sha256.New()
	var num []byte
	for _, s := range samples {
		num = strconv.AppendInt(num[:0], int64(len(s.prompt)), 10)
		h.Write(num)
		h.Write([]byte{0})
		h.Write([]byte(s.prompt))
		num = strconv.AppendInt(num[:0], int64(s.maxTokens), 10)
		h.Write([]byte{0})
		h.Write(num)
		if s.model != "" { // a model mix sends the same prompts elsewhere
			h.Write([]byte{0})
			h.Write([]byte(s.model))
		}
		if s.hasOffset { // a trace's arrival times are part of its work
			num = strconv.AppendInt(num[:0], int64(s.offset), 10)
			h.Write([]byte{0})
			h.Write(num)
		}
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
