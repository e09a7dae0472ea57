package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// words returns a prompt of n words drawn from the vocabulary, starting at
// id from (so two prompts share a prefix when they share from and length).
func words(n, from int) string {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (from + i*7) % tokenize.VocabSize
	}
	s, err := tokenize.Decode(ids)
	if err != nil {
		panic(err)
	}
	return s
}

// scrape parses GET /metrics with Prometheus' own text parser, as a
// benchmark client does.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the one sample of a counter or gauge family.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok || len(f.Metric) == 0 {
		t.Fatalf("no metric %s", name)
	}
	m := f.Metric[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither counter nor gauge", name)
	return 0
}

// profiled runs load between /start_profile and /stop_profile and parses
// the trace the engine answers.
func profiled(t *testing.T, base string, load func()) *profile.Trace {
	t.Helper()
	for _, path := range []string{"/start_profile"} {
		resp := post(t, testCtx(t), base+path, "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	load()
	resp := post(t, testCtx(t), base+"/stop_profile", "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/stop_profile: %d", resp.StatusCode)
	}
	tr, err := profile.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// complete sends one non-streaming completion and returns its body.
func complete(t *testing.T, base, body string, header ...string) string {
	t.Helper()
	resp := post(t, testCtx(t), base+"/v1/completions", body, header...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestPrefixCacheSkipsCachedPrefill(t *testing.T) {
	for _, caching := range []bool{true, false} {
		t.Run(fmt.Sprintf("caching=%v", caching), func(t *testing.T) {
			cfg := zeroConfig()
			cfg.PrefixCaching = caching
			trace := &syncBuffer{}
			cfg.Trace = trace
			e, ts := startEngine(t, cfg)
			prompt := words(320, 5)
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, prompt)
			tr := profiled(t, ts.URL, func() {
				complete(t, ts.URL, body, "X-Request-Id", "first")
				complete(t, ts.URL, body, "X-Request-Id", "second")
				// A prompt sharing the first 100 tokens hits 6 blocks (96 tokens).
				complete(t, ts.URL, fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, prompt[:strings.Index(prompt, words(1, 5+100*7))]+words(50, 9)), "X-Request-Id", "third")
			})
			fams := scrape(t, ts.URL)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"first": 0, "second": 304, "third": 96} // the last token is always computed
			if !caching {
				want = map[string]int{"first": 0, "second": 0, "third": 0}
			}
			for _, r := range trace.records(t) {
				if r.CachedTokens != want[r.RequestID] {
					t.Errorf("%s: cached %d tokens, want %d", r.RequestID, r.CachedTokens, want[r.RequestID])
				}
			}
			// The steps charge only uncached prompt tokens.
			var prefill []int
			for _, s := range tr.Steps {
				if s.PrefillTokens > 0 {
					prefill = append(prefill, s.PrefillTokens)
				}
			}
			wantPrefill := fmt.Sprint([]int{320, 320 - want["second"], 150 - want["third"]})
			if fmt.Sprint(prefill) != wantPrefill {
				t.Errorf("prefill tokens per step %v, want %v", prefill, wantPrefill)
			}
			if caching {
				if q, h := value(t, fams, "vllm:prefix_cache_queries_total"), value(t, fams, "vllm:prefix_cache_hits_total"); q != 790 || h != 400 {
					t.Errorf("prefix cache queries %g hits %g, want 790 and 400", q, h)
				}
			}
		})
	}
}

// cache_salt keeps equal prompts apart in the prefix cache, as vLLM's does:
// the agent salts each measured run, so no run finds the previous run's
// prompts cached and every run starts as cold as the first.
func TestCacheSaltSeparatesPrefixCache(t *testing.T) {
	cfg := zeroConfig()
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)
	prompt := words(320, 5)
	salted := func(salt string) string {
		return fmt.Sprintf(`{"prompt":%q,"max_tokens":2,"cache_salt":%q}`, prompt, salt)
	}
	complete(t, ts.URL, salted("run-1"), "X-Request-Id", "run-1")
	complete(t, ts.URL, salted("run-2"), "X-Request-Id", "run-2")
	complete(t, ts.URL, salted("run-2"), "X-Request-Id", "run-2-again")
	complete(t, ts.URL, fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, prompt), "X-Request-Id", "unsalted")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"run-1": 0, "run-2": 0, "run-2-again": 304, "unsalted": 0}
	for _, r := range trace.records(t) {
		if r.CachedTokens != want[r.RequestID] {
			t.Errorf("%s: cached %d tokens, want %d", r.RequestID, r.CachedTokens, want[r.RequestID])
		}
	}
}

func TestPreemptionWhenKVCacheRunsOut(t *testing.T) {
	cfg := zeroConfig()
	cfg.DecodeStep = time.Millisecond
	cfg.NumGPUBlocks, cfg.BlockSize, cfg.MaxModelLen = 10, 16, 160
	cfg.MaxNumSeqs = 8
	trace := &syncBuffer{}
	cfg.Trace = trace
	e, ts := startEngine(t, cfg)
	const n, out = 4, 60 // each needs ceil((16+60)/16) = 5 blocks; 4 need 20 of 10
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp := post(t, testCtx(t), ts.URL+"/v1/completions",
				fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, words(16, 1000*i), out))
			defer resp.Body.Close()
			events, done := readSSE(t, resp.Body)
			if !done || len(events) != out {
				t.Errorf("request %d: %d events, done %v", i, len(events), done)
				return
			}
			// A preempted sequence recomputes; the client still sees each
			// token once, in order.
			for j, ev := range events {
				if want := vocabSpaced[j%len(vocabSpaced)]; !strings.Contains(ev.data, `"text":"`+want+`"`) {
					t.Errorf("request %d token %d: %s, want %q", i, j, ev.data, want)
					return
				}
			}
		})
	}
	wg.Wait()
	fams := scrape(t, ts.URL)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range trace.records(t) {
		total += r.Preemptions
		if r.OutputTokens != out || r.FinishReason != "length" {
			t.Errorf("%+v", r)
		}
	}
	if total == 0 {
		t.Fatal("no preemptions with 4 sequences needing twice the KV cache")
	}
	if got := value(t, fams, "vllm:num_preemptions_total"); got != float64(total) {
		t.Errorf("vllm:num_preemptions_total %g, trace says %d", got, total)
	}
	if got := value(t, fams, "vllm:kv_cache_usage_perc"); got != 0 {
		t.Errorf("kv cache usage %g after every request finished", got)
	}
}

func TestChunkedPrefill(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxNumBatchedTokens, cfg.MaxNumSeqs = 64, 8
	_, ts := startEngine(t, cfg)
	tr := profiled(t, ts.URL, func() {
		complete(t, ts.URL, fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, words(200, 3)))
	})
	var got []string
	for _, s := range tr.Steps {
		got = append(got, fmt.Sprintf("%s:%d+%d", s.Kind(), s.PrefillTokens, s.DecodeTokens))
	}
	want := "[prefill:64+0 prefill:64+0 prefill:64+0 prefill:8+0 decode:0+1]"
	if fmt.Sprint(got) != want {
		t.Errorf("steps %v, want %s", got, want)
	}
}

// closedLoop keeps c streams busy for d: each sends a completion as soon as
// its last one ended, as a benchmark at fixed concurrency does. Output
// lengths vary around out (out/2 to 3·out/2) so the streams do not
// synchronise.
func closedLoop(t *testing.T, base string, c int, d time.Duration, promptLen, out int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n := out/2 + (w*7+i*13)%(out+1)
				body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, words(promptLen, 100*w+i), n)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the load's time is up
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

func TestPrefillEagernessBatchesPrefill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine under load for two seconds")
	}
	rate := func(eagerness float64) (profile.Summary, *profile.Trace) {
		cfg := zeroConfig()
		cfg.DecodeStep, cfg.PrefillStepOverhead = 2*time.Millisecond, 2*time.Millisecond
		cfg.PrefillEagerness = eagerness
		_, ts := startEngine(t, cfg)
		tr := profiled(t, ts.URL, func() { closedLoop(t, ts.URL, 16, time.Second, 32, 24) })
		return profile.Summarize(tr), tr
	}
	eager, _ := rate(1)
	lazy, _ := rate(0.25)
	// 16 streams of 24 tokens finish about 0.67 requests a step: at
	// eagerness 1 most decoding steps take a prefill; at 0.25 at most a
	// quarter can, each taking several.
	if eager.InterruptionRate < 0.4 {
		t.Errorf("eagerness 1: prefill interrupted %.2f of decoding steps, want most", eager.InterruptionRate)
	}
	if lazy.InterruptionRate > 0.27 {
		t.Errorf("eagerness 0.25: prefill interrupted %.2f of decoding steps, want at most a quarter", lazy.InterruptionRate)
	}
	// Every mixed step pays the prefill overhead, so the eager engine's
	// steps, and with them every decoding sequence's time per token, are
	// longer.
	if float64(eager.StepMean) < 1.1*float64(lazy.StepMean) {
		t.Errorf("mean step %v at eagerness 1, %v at 0.25: want the eager engine slower per step", eager.StepMean, lazy.StepMean)
	}
	if lazy.PrefillTokensPerStep() <= eager.PrefillTokensPerStep() {
		t.Errorf("eagerness 0.25 did not batch prefills: %.1f prompt tokens per prefill step vs %.1f",
			lazy.PrefillTokensPerStep(), eager.PrefillTokensPerStep())
	}
}
