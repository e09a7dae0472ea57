package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
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
	var v struct {
		Count       *int    `json:"count"`
		Tokens      []int64 `json:"tokens"`
		MaxModelLen int     `json:"max_model_len"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return 0, 0, resp.StatusCode, fmt.Errorf("tokenize: answer is not vLLM's {\"tokens\",\"count\"}: %s", jsonFault(err))
	}
	if v.Count != nil {
		return *v.Count, v.MaxModelLen, resp.StatusCode, nil
	}
	if v.Tokens == nil {
		return 0, 0, resp.StatusCode, errors.New(`tokenize: answer has neither "count" nor "tokens"`)
	}
	return len(v.Tokens), v.MaxModelLen, resp.StatusCode, nil
}

// singleTokenWords keeps the vocabulary words the server's tokenizer reads
// as one token after a space, the way they stand inside a prompt. Prompts
// made of them are as many tokens as words on every tokenizer that splits
// on spaces before merging (GPT-2-style BPE, SentencePiece), so block
// boundaries stay token boundaries.
func singleTokenWords(ctx context.Context, tok counter) ([]string, error) {
	keep := make([]bool, len(words))
	err := parallel(ctx, len(words), func(i int) error {
		n, err := tok.count(ctx, " "+words[i])
		keep[i] = n == 1
		return err
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
