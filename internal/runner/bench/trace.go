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

// Policies for a trace row whose prompt and output do not fit the
// model's context (--trace-overlong). A real trace is recorded on models
// with longer contexts than most test engines: a tenth of the first rows
// of Mooncake's conversation trace are past 32k tokens.
const (
	OverlongSkip     = "skip"     // leave the row out (the default), counted
	OverlongTruncate = "truncate" // cut its prompt (and, when it alone is too long, its output) to fit, counted
	OverlongFail     = "fail"     // refuse the run
)

// overlong is what the policy did to a trace's rows.
type overlong struct {
	policy             string
	maxModelLen        int
	rows               int // rows considered (the first NumPrompts)
	skipped, truncated int
	first              int // line of the first row that did not fit; 0: none
}

// count is the number of rows that did not fit.
func (v overlong) count() int { return v.skipped + v.truncated }

// warning says what was done, for the result's warnings; "" when every row fit.
func (v overlong) warning() string {
	switch {
	case v.skipped > 0:
		return fmt.Sprintf("%d of %d trace rows do not fit the model's max_model_len %d (prompt + output tokens; the first at line %d): left out (--trace-overlong skip); the replay sent the other %d",
			v.skipped, v.rows, v.maxModelLen, v.first, v.rows-v.skipped)
	case v.truncated > 0:
		return fmt.Sprintf("%d of %d trace rows do not fit the model's max_model_len %d (the first at line %d): their prompts were cut to fit (--trace-overlong truncate), so the trace's prefix reuse past the cut is lost",
			v.truncated, v.rows, v.maxModelLen, v.first)
	}
	return ""
}

// fitRows sets each row's output to outputLen (--output-len) when that is
// set, then applies the policy to the rows against maxModelLen (0:
// unknown, every row fits).
func fitRows(rows []traceRow, maxModelLen, outputLen int, policy, path string) ([]traceRow, overlong, error) {
	v := overlong{policy: policy, maxModelLen: maxModelLen, rows: len(rows)}
	kept := make([]traceRow, 0, len(rows))
	for _, r := range rows {
		in, out := *r.InputLength, *r.OutputLength
		if outputLen > 0 {
			out = outputLen
			r.OutputLength = &out
		}
		if maxModelLen <= 0 || in+out <= maxModelLen {
			kept = append(kept, r)
			continue
		}
		if v.first == 0 {
			v.first = r.line
		}
		switch policy {
		case OverlongSkip:
			v.skipped++
		case OverlongTruncate:
			v.truncated++
			out = min(out, maxModelLen-1)
			in = maxModelLen - out
			r.InputLength, r.OutputLength = &in, &out
			kept = append(kept, r)
		default: // fail: count them all, so the message says how many
			v.skipped++
		}
	}
	if policy == OverlongFail && v.count() > 0 {
		return nil, v, usageErr("trace-overlong", "%d of %d rows of %s do not fit the model's max_model_len %d (prompt + output tokens; the first at line %d): pass --trace-overlong skip (the default) to leave them out or truncate to cut their prompts, or serve the model with a longer context",
			v.count(), v.rows, path, maxModelLen, v.first)
	}
	if len(kept) == 0 {
		return nil, v, usageErr("trace-overlong", "none of the %d rows of %s fits the model's max_model_len %d: pass --trace-overlong truncate, or serve the model with a longer context",
			v.rows, path, maxModelLen)
	}
	return kept, v, nil
}

// loadTrace turns the first NumPrompts rows of the trace (all when 0) into
// samples sent at their timestamps, scaled by TraceTimeScale, counted from
// the first row sent. Rows that do not fit the model's context are left
// out, cut or refused, as TraceOverlong says, before any prompt is built.
// Warm-up samples have the first rows' lengths but prompts of their own,
// so they do not fill the prefix cache with measured blocks.
func loadTrace(ctx context.Context, o *Options, p promptTokens) (dataset, error) {
	rows, err := readTrace(o.DatasetPath)
	if err != nil {
		return dataset{}, err
	}
	if o.NumPrompts > len(rows) {
		return dataset{}, usageErr("num-prompts", "%d, but the trace %s has %d rows", o.NumPrompts, o.DatasetPath, len(rows))
	}
	if o.NumPrompts > 0 {
		rows = rows[:o.NumPrompts]
	}
	rows, fit, err := fitRows(rows, p.maxModelLen, o.OutputLen, o.TraceOverlong, o.DatasetPath)
	if err != nil {
		return dataset{overlong: fit}, err
	}
	unit, _ := traceFormat(o.Dataset)
	blockSize := o.TraceBlockSize
	t0 := *rows[0].Timestamp
	b := newBlocks(o.Seed, blockSize, p.vocab)

	measured := make([]sample, len(rows))
	for i, r := range rows {
		out := *r.OutputLength // --output-len applied by fitRows
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
		return dataset{}, fmt.Errorf("measure trace prompts with the server's tokenizer: %w", err)
	}

	warmup := make([]sample, o.Warmup)
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x7a3e_0b))
	for i := range warmup {
		m := measured[i%len(measured)]
		warmup[i] = randomSamples(1, m.promptLen, m.maxTokens, rng, p.vocab)[0]
	}
	return dataset{measured: measured, warmup: warmup, overlong: fit}, nil
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
