package sim

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config shapes the simulated engine. Zero durations mean zero time (a
// zero-latency engine), not "use the default"; start from DefaultConfig.
type Config struct {
	Model string // served model id
	// LoRAModules names further models served by the same engine, comma
	// separated, as vLLM's LoRA adapters are (adapters.go).
	LoRAModules string
	MaxModelLen int // prompt + max_tokens limit per request, in tokens

	// Step cost (see step.go): every step costs DecodeStep plus PerSeqCost
	// per scheduled sequence; a step that computes prompt tokens adds
	// PrefillStepOverhead once, BaseTTFT once when prefills start in it
	// (one batched prefill, however many prompts) and PrefillPerToken per
	// prompt token not found in the prefix cache.
	BaseTTFT            time.Duration
	PrefillPerToken     time.Duration
	DecodeStep          time.Duration
	PerSeqCost          time.Duration
	PrefillStepOverhead time.Duration
	Slowdown            float64 // multiplies every step time (1 = none)

	// Scheduler, named as vLLM names them.
	MaxNumSeqs          int     // batch cap; further requests queue
	MaxNumBatchedTokens int     // token budget of one step; longer prompts are prefilled in chunks
	PrefillEagerness    float64 // (0, 1]: share of decoding steps that may take prefill work
	NumGPUBlocks        int     // KV cache size in blocks
	BlockSize           int     // tokens per KV block
	PrefixCaching       bool    // reuse cached KV blocks of identical prompt prefixes

	// Variation (see noise.go).
	Jitter float64 // relative std-dev of each step time, seeded
	Seed   int64
	Noise  Noise

	// Faults.
	ErrorRate    float64 // fraction of requests answered HTTP 500
	StallMS      int     // stall each stream this long after half its tokens
	StartupDelay time.Duration
	// LeakMBPer1kRequests plants a memory leak: each answered request
	// keeps this many MB / 1000 resident for the engine's life (leak.go).
	LeakMBPer1kRequests float64
	// CrashAfter makes the engine's process die (SIGKILL) once it has
	// answered this many completion requests: a crash mid-run at a point
	// a test can name, not at a wall-clock time (0 = never).
	CrashAfter int

	DefaultMaxTokens int    // output length when the request has no max_tokens
	ReasoningTokens  int    // chat streams send this many reasoning deltas before content
	ReasoningField   string // "reasoning_content" (vLLM ≤ 0.10, DeepSeek) or "reasoning" (vLLM ≥ 0.11)

	Trace      io.Writer // one JSON line per finished request when non-nil
	ProfileDir string    // where POST /stop_profile writes its Chrome trace; "" = only in the response
}

// maxGPUBlocks bounds the KV cache's bookkeeping (about 30 bytes a block).
const maxGPUBlocks = 1 << 22

// DefaultConfig returns an engine shaped roughly like a mid-size model on
// one GPU: 15 ms of fixed prefill cost, 8 ms decode steps, 256 sequences, a
// 512k-token KV cache with prefix caching, and a GPU's variation.
func DefaultConfig() Config {
	return Config{
		Model:               "perfgate-sim",
		MaxModelLen:         32768,
		BaseTTFT:            12 * time.Millisecond,
		PrefillPerToken:     20 * time.Microsecond,
		DecodeStep:          8 * time.Millisecond,
		PerSeqCost:          40 * time.Microsecond,
		PrefillStepOverhead: 3 * time.Millisecond,
		Slowdown:            1,
		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 8192,
		PrefillEagerness:    1,
		NumGPUBlocks:        32768,
		BlockSize:           16,
		PrefixCaching:       true,
		Jitter:              0.02,
		Seed:                1,
		Noise:               DefaultNoise(),
		DefaultMaxTokens:    128,
		ReasoningField:      "reasoning_content",
	}
}

// Quiet returns c without any variation: no step jitter and no GPU noise,
// so step times follow the cost model exactly. Tests that need determinism
// start from it.
func (c Config) Quiet() Config {
	c.Jitter = 0
	c.Noise = Noise{InstanceSeed: c.Noise.InstanceSeed}
	return c
}

// validate reports every problem at once so a bad command line is fixed in
// one go.
func (c Config) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("model id is empty: set a served model name"))
	}
	if err := validateAdapters(c); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"base TTFT", c.BaseTTFT},
		{"prefill per token", c.PrefillPerToken},
		{"decode step", c.DecodeStep},
		{"per-sequence cost", c.PerSeqCost},
		{"prefill step overhead", c.PrefillStepOverhead},
		{"startup delay", c.StartupDelay},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %v: must be >= 0", d.name, d.v))
		}
	}
	errs = append(errs, c.validateCapacity()...)
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter is %g: must be in [0, 1]", c.Jitter))
	}
	errs = append(errs, c.Noise.validate()...)
	if !(c.Slowdown > 0) {
		errs = append(errs, fmt.Errorf("slowdown is %g: must be > 0 (1 = none)", c.Slowdown))
	}
	if c.ErrorRate < 0 || c.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("error rate is %g: must be in [0, 1]", c.ErrorRate))
	}
	if c.LeakMBPer1kRequests < 0 || c.LeakMBPer1kRequests > 10000 {
		errs = append(errs, fmt.Errorf("leak is %g MB per 1k requests: must be in [0, 10000]", c.LeakMBPer1kRequests))
	}
	if c.StallMS < 0 {
		errs = append(errs, fmt.Errorf("stall is %d ms: must be >= 0", c.StallMS))
	}
	if c.CrashAfter < 0 {
		errs = append(errs, fmt.Errorf("crash after is %d requests: must be >= 0 (0 = never)", c.CrashAfter))
	}
	if c.DefaultMaxTokens < 1 {
		errs = append(errs, fmt.Errorf("default max tokens is %d: must be >= 1", c.DefaultMaxTokens))
	}
	if c.ReasoningTokens < 0 {
		errs = append(errs, fmt.Errorf("reasoning tokens is %d: must be >= 0", c.ReasoningTokens))
	}
	if c.ReasoningField != "reasoning_content" && c.ReasoningField != "reasoning" {
		errs = append(errs, fmt.Errorf("reasoning field is %q: must be reasoning_content or reasoning", c.ReasoningField))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid sim config: %w", errors.Join(errs...))
	}
	return nil
}

// validateCapacity checks the scheduler's and the KV cache's sizes.
func (c Config) validateCapacity() []error {
	var errs []error
	if c.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("max num seqs is %d: must be >= 1", c.MaxNumSeqs))
	}
	if c.MaxNumBatchedTokens < c.MaxNumSeqs {
		errs = append(errs, fmt.Errorf("max num batched tokens is %d: must be >= max num seqs (%d) so every running sequence can decode in one step", c.MaxNumBatchedTokens, c.MaxNumSeqs))
	}
	if !(c.PrefillEagerness > 0 && c.PrefillEagerness <= 1) {
		errs = append(errs, fmt.Errorf("prefill eagerness is %g: must be in (0, 1] (1 = every step may prefill, as vLLM does)", c.PrefillEagerness))
	}
	if c.BlockSize < 1 || c.BlockSize > 1024 {
		errs = append(errs, fmt.Errorf("block size is %d: must be in 1..1024 (vLLM uses 16)", c.BlockSize))
	}
	if c.NumGPUBlocks < 1 || c.NumGPUBlocks > maxGPUBlocks {
		errs = append(errs, fmt.Errorf("num gpu blocks is %d: must be in 1..%d", c.NumGPUBlocks, maxGPUBlocks))
	}
	if c.MaxModelLen < 2 {
		errs = append(errs, fmt.Errorf("max model len is %d: must be >= 2", c.MaxModelLen))
	} else if c.BlockSize >= 1 && c.NumGPUBlocks >= 1 && c.MaxModelLen > c.NumGPUBlocks*c.BlockSize {
		errs = append(errs, fmt.Errorf("max model len %d is larger than the KV cache (%d blocks of %d tokens = %d): raise num gpu blocks or lower max model len",
			c.MaxModelLen, c.NumGPUBlocks, c.BlockSize, c.NumGPUBlocks*c.BlockSize))
	}
	return errs
}
