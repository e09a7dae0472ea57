package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"
)

// Trace datasets replay production traffic: one JSON object per line with
// the request's arrival "timestamp", its "input_length" and "output_length"
// in tokens, and "hash_ids", the ids of the prompt's KV-cache blocks (equal
// ids mean equal prompt blocks, so a shared prefix of ids is a shared
// prompt prefix). Prompts are synthetic: each hash id names a block of
// words drawn from a generator seeded with the id.
const (
	DatasetTimedTrace = "timed_trace" // timestamps in ms, blocks of --trace-block-size tokens
	DatasetMooncake   = "mooncake"    // Mooncake's traces: timestamps in ms, 512-token blocks
	DatasetBailian    = "bailian"     // Alibaba's Qwen/Bailian traces: timestamps in s, 16-token blocks
)

func isTrace(dataset string) bool {
	return dataset == DatasetTimedTrace || dataset == DatasetMooncake || dataset == DatasetBailian
}

// traceFormat is a trace dataset's units.
func traceFormat(dataset string) (unit time.Duration, blockSize int) {
	switch dataset {
	case DatasetBailian:
		return time.Second, 16
	default:
		return time.Millisecond, 512
	}
}

// traceRow is one line of a trace.
type traceRow struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
	line         int
}

// readTrace reads and checks every row, in time order.
func readTrace(path string) ([]traceRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	var rows []traceRow
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var r traceRow
		if err := json.Unmarshal(text, &r); err != nil {
			return nil, fmt.Errorf("trace %s line %d: %w", path, line, err)
		}
		switch {
		case r.Timestamp == nil || math.IsNaN(*r.Timestamp) || *r.Timestamp < 0:
			return nil, fmt.Errorf("trace %s line %d: no non-negative \"timestamp\"", path, line)
		case r.InputLength == nil || *r.InputLength < 1:
			return nil, fmt.Errorf("trace %s line %d: no positive \"input_length\"", path, line)
		case r.OutputLength == nil || *r.OutputLength < 1:
			return nil, fmt.Errorf("trace %s line %d: no positive \"output_length\"", path, line)
		}
		r.line = line
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("trace %s: no rows", path)
	}
	sort.SliceStable(rows, func(a, b int) bool { return *rows[a].Timestamp < *rows[b].Timestamp })
	return rows, nil
}

// loadTrace turns the first NumPrompts rows of the trace (all when 0) into
// samples sent at their timestamps, scaled by TraceTimeScale, counted from
// the first row. Warm-up samples have the first rows' lengths but prompts
// of their own, so they do not fill the prefix cache with measured blocks.
func loadTrace(ctx context.Context, o *Options, p promptTokens) (measured, warmup []sample, err error) {
	rows, err := readTrace(o.DatasetPath)
	if err != nil {
		return nil, nil, err
	}
	if o.NumPrompts > len(rows) {
		return nil, nil, usageErr("num-prompts", "%d, but the trace %s has %d rows", o.NumPrompts, o.DatasetPath, len(rows))
	}
	if o.NumPrompts > 0 {
		rows = rows[:o.NumPrompts]
	}
	unit, _ := traceFormat(o.Dataset)
	blockSize := o.TraceBlockSize
	t0 := *rows[0].Timestamp
	b := newBlocks(o.Seed, blockSize, p.vocab)

	measured = make([]sample, len(rows))
	for i, r := range rows {
		out := *r.OutputLength
		if o.OutputLen > 0 {
			out = o.OutputLen
		}
		offset := time.Duration((*r.Timestamp - t0) * o.TraceTimeScale * float64(unit))
		measured[i] = sample{promptLen: *r.InputLength, maxTokens: out, offset: offset, hasOffset: true}
	}
	// Blocks are laid out in one goroutine (the block cache is shared);
	// each row's own words come from a generator of its own, which its
	// fitting goroutine then continues.
	ws := make([][]string, len(rows))
	more := make([]func() string, len(rows))
	for i, r := range rows {
		more[i] = wordsFrom(p.vocab, rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)^0x7ace_0ff)))
		ws[i] = b.prompt(r.HashIDs, *r.InputLength, more[i])
		measured[i].prompt = strings.Join(ws[i], " ")
	}
	if p.tok != nil {
		err = parallel(ctx, len(rows), func(i int) error {
			text, n, err := fitPrompt(ctx, p.tok, ws[i], *rows[i].InputLength, more[i])
			measured[i].prompt, measured[i].promptLen = text, n
			return err
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("measure trace prompts with the server's tokenizer: %w", err)
	}

	warmup = make([]sample, o.Warmup)
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x7a3e_0b))
	for i := range warmup {
		m := measured[i%len(measured)]
		warmup[i] = randomSamples(1, m.promptLen, m.maxTokens, rng, p.vocab)[0]
	}
	return measured, warmup, nil
}

// blocks makes and remembers the words of each hash id's block.
type blocks struct {
	seed  int64
	size  int
	vocab []string
	cache map[int64][]string
}

func newBlocks(seed int64, size int, vocab []string) *blocks {
	return &blocks{seed: seed, size: size, vocab: vocab, cache: map[int64][]string{}}
}

// words returns block h: size words drawn by a generator seeded with h, so
// every request naming h gets the same text. Not for concurrent use.
func (b *blocks) words(h int64) []string {
	if w, ok := b.cache[h]; ok {
		return w
	}
	rng := rand.New(rand.NewPCG(uint64(b.seed), uint64(h)^0xb10c_5eed))
	w := make([]string, b.size)
	for i := range w {
		w[i] = b.vocab[rng.IntN(len(b.vocab))]
	}
	b.cache[h] = w
	return w
}

// prompt lays the blocks of ids end to end and cuts them at n words; a
// prompt longer than its blocks ends with words of its own from more.
func (b *blocks) prompt(ids []int64, n int, more func() string) []string {
	ws := make([]string, 0, n)
	for _, h := range ids {
		if len(ws) >= n {
			break
		}
		ws = append(ws, b.words(h)...)
	}
	if len(ws) > n {
		ws = ws[:n]
	}
	for len(ws) < n {
		ws = append(ws, more())
	}
	return ws
}
