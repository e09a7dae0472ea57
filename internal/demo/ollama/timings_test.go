package ollama_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
)

// TestOllamaClientTimings compares perfgate bench's client-side TTFT and
// TPOT with what Ollama reports about the same kind of request, at
// concurrency 1, 4 and 16 (the engine has OLLAMA_NUM_PARALLEL=4 slots):
// a bench run on /v1/completions, then the same load on Ollama's native
// /api/generate, whose last chunk carries its own timings
// (load_duration, prompt_eval_duration, eval_count, eval_duration,
// total_duration). Per native request the client's end-to-end time must
// contain the server's total and the client's TTFT the server's load and
// prompt evaluation; the medians go in docs/real-engine.md.
//
// A measurement, not part of the suite:
//
//	PERFGATE_E2E_OLLAMA_TIMINGS=1 go test -run TestOllamaClientTimings -v ./internal/demo/ollama
func TestOllamaClientTimings(t *testing.T) {
	if os.Getenv("PERFGATE_E2E_OLLAMA_TIMINGS") == "" {
		t.Skip("a measurement: set PERFGATE_E2E_OLLAMA_TIMINGS=1 to run it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	srv := startOllama(t, ctx)
	const prompts, inputLen, outputLen = 64, 16, 32
	var table strings.Builder
	fmt.Fprintf(&table, "| concurrency | prompt tokens (bench, native) | bench TTFT | native client TTFT | Ollama load + prompt eval | Ollama wait (total − load − prompt − eval) | bench TPOT | native client TPOT | Ollama eval_duration / eval_count |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range []int{1, 4, 16} {
		res, err := bench.Run(ctx, bench.Options{Target: srv.BaseURL(), Model: demo.OllamaModel, Dataset: "random", InputLen: inputLen,
			OutputLen: outputLen, NumPrompts: prompts, MaxConcurrency: c, Warmup: 4, Seed: 7, IgnoreEOS: true, Timeout: 10 * time.Minute})
		if err != nil {
			t.Fatalf("concurrency %d: bench: %v", c, err)
		}
		benchTTFT, _ := res.Metric("median_ttft_ms")
		benchTPOT, _ := res.Metric("median_tpot_ms")
		// The native prompts are sized to bench's prompt tokens (Ollama's
		// usage count): its random words and these tokenize differently.
		probe, err := native(ctx, srv.BaseURL(), 1, 1, inputLen, 1)
		if err != nil || probe[0].promptCount == 0 {
			t.Fatalf("concurrency %d: native probe: %v", c, err)
		}
		words := max(1, int(math.Round(float64(inputLen)*float64(res.TotalInputTokens)/float64(res.Completed)/float64(probe[0].promptCount))))
		nat, err := native(ctx, srv.BaseURL(), prompts, c, words, outputLen)
		if err != nil {
			t.Fatalf("concurrency %d: native: %v", c, err)
		}
		var cTTFT, sTTFT, wait, cTPOT, sTPOT, ptoks []float64
		for i, r := range nat {
			// The server's times are inside the client's (1 ms for the
			// clocks' and the stream's granularity).
			if r.clientE2E < r.totalMS-1 || r.clientTTFT < r.loadMS+r.promptMS-1 {
				t.Errorf("concurrency %d, request %d: client TTFT %.1f ms, e2e %.1f ms; Ollama load+prompt %.1f ms, total %.1f ms: the server's time is not inside the client's",
					c, i, r.clientTTFT, r.clientE2E, r.loadMS+r.promptMS, r.totalMS)
			}
			if r.evalCount != outputLen || r.promptCount <= 0 {
				t.Errorf("concurrency %d, request %d: eval_count %d (want %d), prompt_eval_count %d", c, i, r.evalCount, outputLen, r.promptCount)
			}
			ptoks = append(ptoks, float64(r.promptCount))
			cTTFT = append(cTTFT, r.clientTTFT)
			sTTFT = append(sTTFT, r.loadMS+r.promptMS)
			wait = append(wait, r.totalMS-r.loadMS-r.promptMS-r.evalMS)
			cTPOT = append(cTPOT, (r.clientE2E-r.clientTTFT)/float64(r.evalCount-1))
			sTPOT = append(sTPOT, r.evalMS/float64(r.evalCount))
		}
		fmt.Fprintf(&table, "| %d | %.0f, %.0f | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2f ms | %.2f ms | %.2f ms |\n",
			c, float64(res.TotalInputTokens)/float64(res.Completed), median(ptoks), benchTTFT, median(cTTFT), median(sTTFT), median(wait), benchTPOT, median(cTPOT), median(sTPOT))
	}
	t.Logf("%d prompts of %d words, %d output tokens, medians over requests:\n%s", prompts, inputLen, outputLen, table.String())
}

// nativeRecord is one /api/generate request: the client's view and
// Ollama's own timings (ms).
type nativeRecord struct {
	clientTTFT, clientE2E             float64
	loadMS, promptMS, evalMS, totalMS float64
	evalCount, promptCount            int
}

// native sends n streamed /api/generate requests of random words, c at a
// time, at temperature 0 with num_predict tokens each.
func native(ctx context.Context, base string, n, c, words, predict int) ([]nativeRecord, error) {
	vocab := strings.Fields("the of and to in is was that for on with as by at from his her model engine token cache batch")
	out := make([]nativeRecord, n)
	errs := make([]error, n)
	sem := make(chan struct{}, c)
	var wg sync.WaitGroup
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		p := make([]string, words)
		for k := range p {
			p[k] = vocab[rng.IntN(len(vocab))]
		}
		body, _ := json.Marshal(map[string]any{"model": demo.OllamaModel, "prompt": strings.Join(p, " "), "raw": true, "stream": true,
			"options": map[string]any{"num_predict": predict, "temperature": 0}})
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = generate(ctx, base, body)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
	}
	return out, nil
}

func generate(ctx context.Context, base string, body []byte) (nativeRecord, error) {
	var r nativeRecord
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/generate", bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var chunk struct {
			Response           string `json:"response"`
			Done               bool   `json:"done"`
			LoadDuration       int64  `json:"load_duration"`
			PromptEvalDuration int64  `json:"prompt_eval_duration"`
			EvalCount          int    `json:"eval_count"`
			PromptEvalCount    int    `json:"prompt_eval_count"`
			EvalDuration       int64  `json:"eval_duration"`
			TotalDuration      int64  `json:"total_duration"`
			Error              string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &chunk); err != nil {
			return r, fmt.Errorf("chunk %q: %w", sc.Text(), err)
		}
		if chunk.Error != "" {
			return r, fmt.Errorf("ollama: %s", chunk.Error)
		}
		ms := func(ns int64) float64 { return float64(ns) / 1e6 }
		if r.clientTTFT == 0 && (chunk.Response != "" || chunk.Done) {
			r.clientTTFT = ms(time.Since(start).Nanoseconds())
		}
		if chunk.Done {
			r.clientE2E = ms(time.Since(start).Nanoseconds())
			r.loadMS, r.promptMS, r.evalMS, r.totalMS = ms(chunk.LoadDuration), ms(chunk.PromptEvalDuration), ms(chunk.EvalDuration), ms(chunk.TotalDuration)
			r.evalCount, r.promptCount = chunk.EvalCount, chunk.PromptEvalCount
			return r, nil
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	return r, fmt.Errorf("stream ended without done")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
