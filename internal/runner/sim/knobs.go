package sim

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// knob is one engine setting, reachable as a flag (--decode-step) and as a
// key of a config file (decode_step): one table drives both, so they cannot
// drift apart.
type knob struct {
	name  string // flag name; the file key is the same with underscores
	usage string
	field func(c *Config) any // pointer to the field
}

func (k knob) key() string { return strings.ReplaceAll(k.name, "-", "_") }

var knobs = []knob{
	{"model", "served model id", func(c *Config) any { return &c.Model }},
	{"lora-modules", "further model names the engine serves beside --model, comma separated (vLLM's LoRA adapters): one batch, a prefix cache of their own", func(c *Config) any { return &c.LoRAModules }},
	{"max-model-len", "longest prompt + max_tokens a request may ask for, in tokens", func(c *Config) any { return &c.MaxModelLen }},
	{"base-ttft", "fixed cost of a batched prefill: once per step in which prefills start, however many prompts", func(c *Config) any { return &c.BaseTTFT }},
	{"prefill-per-token", "prefill time per prompt token not in the prefix cache", func(c *Config) any { return &c.PrefillPerToken }},
	{"decode-step", "base time of one engine step", func(c *Config) any { return &c.DecodeStep }},
	{"per-seq-cost", "extra step time per sequence in the batch", func(c *Config) any { return &c.PerSeqCost }},
	{"prefill-step-overhead", "extra time of a step that computes prompt tokens (no decode-only fast path)", func(c *Config) any { return &c.PrefillStepOverhead }},
	{"slowdown", "multiply every step time (1 = none; 1.2 = a 20% regression)", func(c *Config) any { return &c.Slowdown }},
	{"max-num-seqs", "batch cap; further requests queue", func(c *Config) any { return &c.MaxNumSeqs }},
	{"max-num-batched-tokens", "token budget of one step; longer prompts are prefilled in chunks", func(c *Config) any { return &c.MaxNumBatchedTokens }},
	{"prefill-eagerness", "share (0, 1] of decoding steps that may take prefill work; lower batches prefills and interrupts decode less", func(c *Config) any { return &c.PrefillEagerness }},
	{"num-gpu-blocks", "KV cache size in blocks", func(c *Config) any { return &c.NumGPUBlocks }},
	{"block-size", "tokens per KV cache block", func(c *Config) any { return &c.BlockSize }},
	{"enable-prefix-caching", "reuse the KV blocks of identical prompt prefixes (vLLM v1's default)", func(c *Config) any { return &c.PrefixCaching }},
	{"jitter", "relative std-dev of each step time", func(c *Config) any { return &c.Jitter }},
	{"seed", "seed of jitter, clock states, throttles and error injection", func(c *Config) any { return &c.Seed }},
	{"instance-seed", "seed of the simulated card's speed factor (0 = from --seed)", func(c *Config) any { return &c.Noise.InstanceSeed }},
	{"card-cv", "std-dev of the card speed factor across instances (log scale)", func(c *Config) any { return &c.Noise.CardCV }},
	{"session-cv", "std-dev of the run-level clock state (log scale)", func(c *Config) any { return &c.Noise.SessionCV }},
	{"session-every", "mean time between clock-state changes (0 = one state per run)", func(c *Config) any { return &c.Noise.SessionEvery }},
	{"drift-per-hour", "relative change of step time per hour since start", func(c *Config) any { return &c.Noise.DriftPerHour }},
	{"throttle-every", "mean time between throttle episodes (0 = none)", func(c *Config) any { return &c.Noise.ThrottleEvery }},
	{"throttle-for", "length of a throttle episode", func(c *Config) any { return &c.Noise.ThrottleFor }},
	{"throttle-slowdown", "extra step time while throttled (0.15 = 15% slower)", func(c *Config) any { return &c.Noise.ThrottleSlowdown }},
	{"error-rate", "fraction of requests answered HTTP 500", func(c *Config) any { return &c.ErrorRate }},
	{"stall-ms", "stall each stream this many ms after half its tokens", func(c *Config) any { return &c.StallMS }},
	{"leak-mb-per-1k-requests", "plant a memory leak: every answered request keeps this many MB/1000 resident (0 = none)", func(c *Config) any { return &c.LeakMBPer1kRequests }},
	{"crash-after", "a fault: the process dies (SIGKILL) after answering this many completion requests (0 = never)", func(c *Config) any { return &c.CrashAfter }},
	{"startup-delay", "answer /health 503 for this long after start", func(c *Config) any { return &c.StartupDelay }},
	{"default-max-tokens", "output length when a request sets no max_tokens", func(c *Config) any { return &c.DefaultMaxTokens }},
	{"reasoning-tokens", "chat responses send this many reasoning tokens before content", func(c *Config) any { return &c.ReasoningTokens }},
	{"reasoning-field", "delta key of reasoning tokens: reasoning_content or reasoning", func(c *Config) any { return &c.ReasoningField }},
}

// KnobKeys lists the keys a sim config file may hold, in table order.
func KnobKeys() []string {
	out := make([]string, len(knobs))
	for i, k := range knobs {
		out[i] = k.key()
	}
	return out
}

// BindFlags defines one flag per knob on fs, with DefaultConfig's values
// as defaults, and returns a function that copies the flags the command
// line set onto a base config: flags override a config file, and a flag
// left alone does not reset what the file said.
func BindFlags(fs *flag.FlagSet) (overlay func(base Config) Config) {
	set := DefaultConfig()
	byName := map[string]knob{}
	for _, k := range knobs {
		byName[k.name] = k
		switch p := k.field(&set).(type) {
		case *string:
			fs.StringVar(p, k.name, *p, k.usage)
		case *int:
			fs.IntVar(p, k.name, *p, k.usage)
		case *int64:
			fs.Int64Var(p, k.name, *p, k.usage)
		case *float64:
			fs.Float64Var(p, k.name, *p, k.usage)
		case *bool:
			fs.BoolVar(p, k.name, *p, k.usage)
		case *time.Duration:
			fs.DurationVar(p, k.name, *p, k.usage)
		default:
			panic(fmt.Sprintf("sim: knob %s has an unsupported type %T", k.name, p))
		}
	}
	return func(base Config) Config {
		fs.Visit(func(f *flag.Flag) {
			if k, ok := byName[f.Name]; ok {
				copyKnob(k, &base, &set)
			}
		})
		return base
	}
}

// copyKnob sets k's field of dst to its value in src.
func copyKnob(k knob, dst, src *Config) {
	switch d := k.field(dst).(type) {
	case *string:
		*d = *k.field(src).(*string)
	case *int:
		*d = *k.field(src).(*int)
	case *int64:
		*d = *k.field(src).(*int64)
	case *float64:
		*d = *k.field(src).(*float64)
	case *bool:
		*d = *k.field(src).(*bool)
	case *time.Duration:
		*d = *k.field(src).(*time.Duration)
	}
}
