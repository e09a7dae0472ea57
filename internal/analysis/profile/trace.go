// Package profile reads and compares scheduler profiles: one record per
// engine step (its time, its prefill and decode tokens, the batch, the
// queue, preemptions) and the engine's idle spans, as perfgate's simulated
// engine writes them on POST /stop_profile. The file is a Chrome trace
// (Trace Event Format), so it opens in Perfetto or chrome://tracing; this
// package parses it back, summarises it and diffs a base trace against a
// head trace into "where the time went": step time, how often prefill
// interrupts decoding, batch sizes, idle gaps and preemptions, as a small
// markdown table, a list of findings and a numeric fingerprint for
// nearest-neighbour matching of regressions.
//
// The trace format, so another engine can write it: a JSON object with
// "traceEvents"; each step is a complete event ("ph": "X") with "cat":
// "step", "ts" and "dur" in microseconds since the trace start, and "args"
// holding prefill_tokens, cached_tokens, decode_tokens, prefill_seqs,
// decode_seqs, running, waiting, preemptions and kv_cache_usage; each idle
// span is a complete event with "cat": "idle". "otherData" carries the
// engine, model, start time and configuration. Gzipped files (as vLLM's
// profiler writes) are read too.
package profile

import "time"

// Trace is one profile: what the scheduler did between start and stop.
type Trace struct {
	Engine string         // e.g. "perfgate-sim"
	Model  string         // served model
	Start  time.Time      // wall clock at the first recorded instant
	Config map[string]any // the engine's knobs, free-form
	Steps  []Step
	Idle   []Span // times the scheduler had nothing to run
}

// Step is one engine step. Times are offsets from Trace.Start.
type Step struct {
	Start         time.Duration
	Dur           time.Duration
	PrefillTokens int // prompt tokens computed (prefix-cache hits excluded)
	CachedTokens  int // prompt tokens of sequences admitted in this step found in the prefix cache
	DecodeTokens  int // one per decoding sequence
	PrefillSeqs   int // sequences computing prompt (or recomputing)
	DecodeSeqs    int
	Running       int // batch after the step
	Waiting       int // queue after the step
	Preemptions   int
	KVUsage       float64 // share of KV blocks in use after the step
}

// Span is an interval of a trace.
type Span struct {
	Start, Dur time.Duration
}

// Kind classifies a step by what it computed.
type Kind int

// Step kinds.
const (
	Decode  Kind = iota // decode tokens only
	Prefill             // prompt tokens only
	Mixed               // both: prefill interrupted decoding
)

func (k Kind) String() string {
	switch k {
	case Decode:
		return "decode"
	case Prefill:
		return "prefill"
	default:
		return "mixed"
	}
}

// Kind is what the step computed.
func (s Step) Kind() Kind {
	prefill := s.PrefillTokens > 0 || s.PrefillSeqs > 0
	switch {
	case prefill && s.DecodeSeqs > 0:
		return Mixed
	case prefill:
		return Prefill
	default:
		return Decode
	}
}

// Batch is the number of sequences the step computed.
func (s Step) Batch() int { return s.PrefillSeqs + s.DecodeSeqs }
