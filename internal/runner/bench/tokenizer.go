package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// counter measures text in model tokens.
type counter interface {
	count(ctx context.Context, text string) (int, error)
}

// serverTokenizer counts with the engine's own tokenizer through vLLM's
// POST /tokenize ({"model","prompt"} → {"tokens":[…],"count":n,
// "max_model_len":m}), so prompt lengths are the model's tokens, not words.
type serverTokenizer struct {
	client  *http.Client
	url     string
	model   string
	apiKey  string
	timeout time.Duration // per call
	// digest asks call to keep a digest of the token ids in last; only
	// fingerprint sets it, before the tokenizer is shared.
	digest bool
	last   [32]byte
}

// tokenizeWorkers bounds the /tokenize calls in flight while prompts are
// built: enough to hide a round trip, few enough not to load the engine.
const tokenizeWorkers = 8

// noAnswerError is a request that could not connect at all.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string { return "tokenize: " + cleanError(e.err) }

func (e *noAnswerError) Unwrap() error { return e.err }

// errNoTokenize says the server has no /tokenize route.
var errNoTokenize = errors.New("no /tokenize")

// detectTokenizer asks the server's /tokenize to count a word, waiting at
// most timeout. It returns errNoTokenize when the route is missing (any
// 404 or 405), so the client falls back to counting words; a
// *noAnswerError when the server cannot be reached at all; any other
// failure as it is.
func detectTokenizer(ctx context.Context, client *http.Client, target, model, apiKey string, timeout time.Duration) (*serverTokenizer, int, error) {
	t := &serverTokenizer{client: client, url: target + "/tokenize", model: model, apiKey: apiKey, timeout: min(timeout, 30*time.Second)}
	n, maxLen, status, err := t.call(ctx, "hello")
	t.timeout = 30 * time.Second
	switch {
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return nil, 0, errNoTokenize
	case err != nil:
		return nil, 0, err
	case n < 1:
		return nil, 0, fmt.Errorf("%s counted %q as %d tokens", t.url, "hello", n)
	}
	return t, maxLen, nil
}

func (t *serverTokenizer) count(ctx context.Context, text string) (int, error) {
	n, _, _, err := t.call(ctx, text)
	return n, err
}

// fingerprint tokenizes text and returns its count and a digest of the
// token ids: two tokenizers that give the same ids for the calibration
// text are taken as one for the calibration cache.
func (t *serverTokenizer) fingerprint(ctx context.Context, text string) (int, [32]byte, error) {
	t.digest = true
	defer func() { t.digest = false }()
	n, _, _, err := t.call(ctx, text)
	return n, t.last, err
}

// call tokenizes text without special tokens (no BOS, no chat template):
// the prompt's own length, as vLLM's datasets measure it.
func (t *serverTokenizer) call(ctx context.Context, text string) (count, maxLen, status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	body, err := json.Marshal(struct {
		Model            string `json:"model"`
		Prompt           string `json:"prompt"`
		AddSpecialTokens bool   `json:"add_special_tokens"`
	}{t.model, text, false})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("encode tokenize request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.apiKey)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		var oerr *net.OpError
		var derr *net.DNSError
		if (errors.As(err, &oerr) && oerr.Op == "dial") || errors.As(err, &derr) {
			return 0, 0, 0, &noAnswerError{err}
		}
		return 0, 0, 0, fmt.Errorf("tokenize: %s", cleanError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, 0, resp.StatusCode, fmt.Errorf("tokenize: read answer: %s", cleanError(err))
	}
	if resp.StatusCode != http.StatusOK {
		msg := errorMessage(data)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return 0, 0, resp.StatusCode, fmt.Errorf("tokenize: HTTP %d: %s", resp.StatusCode, msg)
	}
	// The ids are kept raw: decoding a prompt's thousand ids into
	// integers would cost more than the rest of the call.
	var v struct {
		Count       *int            `json:"count"`
		Tokens      json.RawMessage `json:"tokens"`
		MaxModelLen int             `json:"max_model_len"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return 0, 0, resp.StatusCode, fmt.Errorf("tokenize: answer is not vLLM's {\"tokens\",\"count\"}: %s", jsonFault(err))
	}
	if t.digest {
		t.last = sha256.Sum256(v.Tokens)
	}
	if v.Count != nil {
		return *v.Count, v.MaxModelLen, resp.StatusCode, nil
	}
	var ids []json.RawMessage
	if v.Tokens == nil || json.Unmarshal(v.Tokens, &ids) != nil {
		return 0, 0, resp.StatusCode, errors.New(`tokenize: answer has neither "count" nor a "tokens" list`)
	}
	return len(ids), v.MaxModelLen, resp.StatusCode, nil
}

// singleTokenWords keeps the vocabulary words the server's tokenizer reads
// as one token after a space, the way they stand inside a prompt. Prompts
// made of them are as many tokens as words on every tokenizer that splits
// on spaces before merging (GPT-2-style BPE, SentencePiece), so block
// boundaries stay token boundaries.
//
// The words are tested in groups: on such a tokenizer every word is at
// least one token, so a group of n words that counts n tokens is n
// single-token words, and only a group that counts more is split in two
// and tested again, down to single words. The common case costs one call
// per group instead of one per word. rootCount, when ≥ 0, is what the
// whole vocabulary (vocabText) already counted.
func singleTokenWords(ctx context.Context, tok counter, rootCount int) ([]string, error) {
	keep := make([]bool, len(words))
	if rootCount == len(words) {
		return append([]string(nil), words...), nil
	}
	const groups = tokenizeWorkers
	size := (len(words) + groups - 1) / groups
	err := parallel(ctx, groups, func(g int) error {
		lo, hi := g*size, min((g+1)*size, len(words))
		return markSingles(ctx, tok, lo, hi, keep)
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for i, w := range words {
		if keep[i] {
			out = append(out, w)
		}
	}
	return out, nil
}

// markSingles sets keep[i] for the single-token words of words[lo:hi].
func markSingles(ctx context.Context, tok counter, lo, hi int, keep []bool) error {
	if lo >= hi {
		return nil
	}
	n, err := tok.count(ctx, " "+strings.Join(words[lo:hi], " "))
	if err != nil {
		return err
	}
	if n == hi-lo {
		for i := lo; i < hi; i++ {
			keep[i] = true
		}
		return nil
	}
	if hi-lo == 1 {
		return nil
	}
	mid := (lo + hi) / 2
	if err := markSingles(ctx, tok, lo, mid, keep); err != nil {
		return err
	}
	return markSingles(ctx, tok, mid, hi, keep)
}

// vocabText is the calibration text: every vocabulary word after a space.
func vocabText() string { return " " + strings.Join(words, " ") }

// The calibration cache. A benchmark repeated in one process (the runner
// agent runs every repeat of a job in its own process, one after another)
// would otherwise count the same prompts with the same tokenizer again
// each time: with 128-token outputs that is a large share of the client's
// CPU. Entries are keyed by the server's /tokenize URL, the model and a
// fingerprint of the tokenizer (its ids for vocabText), so an engine
// restarted with another tokenizer under the same name is calibrated
// afresh; within a key, counts are keyed by a digest of the text, so a
// prompt set hits the cache only when its prompts are the same.
type calibrationKey struct {
	url, model  string
	fingerprint [32]byte
}

type calibration struct {
	vocab  []string
	mu     sync.Mutex
	counts map[[32]byte]int
}

// maxCachedCounts bounds each calibration's memo (about 50 bytes an entry).
const maxCachedCounts = 1 << 17

var calibrations = struct {
	mu sync.Mutex
	m  map[calibrationKey]*calibration
}{m: map[calibrationKey]*calibration{}}

// calibrationFor returns the cached calibration of key, or a new empty one
// (vocab nil) that the caller fills. At most a few keys are kept.
func calibrationFor(key calibrationKey) *calibration {
	calibrations.mu.Lock()
	defer calibrations.mu.Unlock()
	if c, ok := calibrations.m[key]; ok {
		return c
	}
	if len(calibrations.m) >= 4 {
		clear(calibrations.m)
	}
	c := &calibration{counts: map[[32]byte]int{}}
	calibrations.m[key] = c
	return c
}

// cachedCounter counts through the calibration's memo.
type cachedCounter struct {
	inner counter
	cal   *calibration
}

func (c cachedCounter) count(ctx context.Context, text string) (int, error) {
	h := sha256.Sum256([]byte(text))
	c.cal.mu.Lock()
	n, ok := c.cal.counts[h]
	c.cal.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := c.inner.count(ctx, text)
	if err != nil {
		return 0, err
	}
	c.cal.mu.Lock()
	if len(c.cal.counts) >= maxCachedCounts {
		clear(c.cal.counts)
	}
	c.cal.counts[h] = n
	c.cal.mu.Unlock()
	return n, nil
}

// fitPrompt joins ws and checks the server counts exactly n tokens; when it
// does not, it drops words from the end or appends more() until it does,
// checking at most six times. It returns the text and the count measured
// last, which is the prompt's true length either way. Only the tail
// changes, so a shared prefix stays shared.
func fitPrompt(ctx context.Context, tok counter, ws []string, n int, more func() string) (string, int, error) {
	const checks = 6
	for try := 1; ; try++ {
		text := strings.Join(ws, " ")
		c, err := tok.count(ctx, text)
		if err != nil {
			return "", 0, err
		}
		if c == n || try == checks {
			return text, c, nil
		}
		if c > n {
			drop := min(c-n, len(ws)-1)
			if drop < 1 {
				return text, c, nil
			}
			ws = ws[:len(ws)-drop]
			continue
		}
		for range n - c {
			ws = append(ws, more())
		}
	}
}

// parallel runs f(0..n-1) on tokenizeWorkers goroutines and returns the
// first error.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(tokenizeWorkers)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// wordsFrom returns a source of words drawn from vocab.
func wordsFrom(vocab []string, rng *rand.Rand) func() string {
	return func() string { return vocab[rng.IntN(len(vocab))] }
}
