// Package sim is a simulated LLM inference engine with an OpenAI-compatible
// HTTP API. It schedules requests the way a continuously batching engine
// (vLLM) does: one loop runs decode steps, admits queued requests while the
// batch has room and emits one token per running sequence per step, so
// throughput saturates and time to first token grows with load. Tests, the
// demo and the quick start run against it instead of a GPU.
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
	Model            string        // served model id
	BaseTTFT         time.Duration // fixed prefill overhead per request
	PrefillPerToken  time.Duration // prefill time per prompt token
	DecodeStep       time.Duration // base time of one decode step
	PerSeqCost       time.Duration // extra step time per running sequence
	MaxNumSeqs       int           // batch cap; further requests queue
	Jitter           float64       // relative std-dev of each step time, seeded
	Seed             int64
	Slowdown         float64 // multiplies every step time (1 = none)
	ErrorRate        float64 // fraction of requests answered HTTP 500
	StallMS          int     // stall each stream this long after half its tokens
	DefaultMaxTokens int     // output length when the request has no max_tokens
	StartupDelay     time.Duration
	Trace            io.Writer // one JSON line per finished request when non-nil
}

// DefaultConfig returns an engine shaped roughly like a mid-size model on
// one GPU: 15 ms prefill overhead, 8 ms decode steps, 256 sequences.
func DefaultConfig() Config {
	return Config{
		Model:            "perfgate-sim",
		BaseTTFT:         15 * time.Millisecond,
		PrefillPerToken:  20 * time.Microsecond,
		DecodeStep:       8 * time.Millisecond,
		PerSeqCost:       40 * time.Microsecond,
		MaxNumSeqs:       256,
		Jitter:           0.02,
		Seed:             1,
		Slowdown:         1,
		DefaultMaxTokens: 128,
	}
}

// validate reports every problem at once so a bad command line is fixed in
// one go.
func (c Config) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("model id is empty: set a served model name"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"base TTFT", c.BaseTTFT},
		{"prefill per token", c.PrefillPerToken},
		{"decode step", c.DecodeStep},
		{"per-sequence cost", c.PerSeqCost},
		{"startup delay", c.StartupDelay},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %v: must be >= 0", d.name, d.v))
		}
	}
	if c.MaxNumSeqs < 1 {
		errs = append(errs, fmt.Errorf("max num seqs is %d: must be >= 1", c.MaxNumSeqs))
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		errs = append(errs, fmt.Errorf("jitter is %g: must be in [0, 1]", c.Jitter))
	}
	if !(c.Slowdown > 0) {
		errs = append(errs, fmt.Errorf("slowdown is %g: must be > 0 (1 = none)", c.Slowdown))
	}
	if c.ErrorRate < 0 || c.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("error rate is %g: must be in [0, 1]", c.ErrorRate))
	}
	if c.StallMS < 0 {
		errs = append(errs, fmt.Errorf("stall is %d ms: must be >= 0", c.StallMS))
	}
	if c.DefaultMaxTokens < 1 {
		errs = append(errs, fmt.Errorf("default max tokens is %d: must be >= 1", c.DefaultMaxTokens))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid sim config: %w", errors.Join(errs...))
	}
	return nil
}
