// Package sim is a simulated LLM inference engine with vLLM's OpenAI-compatible
// HTTP API. Tests, the demo and the quick start run against it instead of a
// GPU, so it behaves like vLLM's server wherever a benchmark or a gate can
// look: the same stream chunks (a role-only first chunk, finish_reason and
// stop_reason), /v1/models with max_model_len, /tokenize and /detokenize,
// Prometheus /metrics under vLLM's names, and /start_profile, /stop_profile.
//
// # Scheduler
//
// One goroutine runs engine steps the way vLLM's v1 scheduler does. A step
// first serves the running sequences in admission order (one token each for
// decoding ones, a chunk of the prompt for prefilling ones, within a budget
// of MaxNumBatchedTokens), then admits waiting requests while the batch has
// room (MaxNumSeqs), budget and KV blocks. The step lasts the cost model's
// time (step.go), then every sequence whose prompt is fully computed gets one
// token.
//
// The KV cache holds NumGPUBlocks blocks of BlockSize tokens. A sequence
// takes blocks as it grows; when one is needed and none is free, the
// youngest running sequence is preempted: its blocks are freed and it goes
// back to the head of the queue to recompute. With PrefixCaching a full
// block keeps the chained hash of its token ids (prompt and generated), so
// a later request with the same prefix takes the block instead of computing
// it, and its cost is not charged; freed cached blocks are evicted least
// recently freed first.
//
// PrefillEagerness is how eagerly prefill work is put into steps that are
// decoding: at 1 (vLLM's behaviour) any step may carry prefill, at 0.25 only
// every fourth decoding step, so waiting prompts are batched and decoding is
// interrupted less often, at the price of time to first token.
//
// LeakMBPer1kRequests plants a memory leak for the soak tier: every
// answered request keeps its share resident for the engine's life, shown
// as perfgate_sim_leaked_bytes and in process_resident_memory_bytes.
//
// # Noise
//
// Step times vary the way a GPU's do (noise.go), in four independent parts,
// each with its own knob and each off at zero:
//
//   - a card factor: a speed multiplier fixed for the engine's life, drawn
//     from Noise.InstanceSeed (lognormal, std-dev Noise.CardCV), so two
//     instances differ as two cards of one model do;
//   - a clock state: a run-level multiplier, piecewise constant, that
//     changes at random times (mean Noise.SessionEvery) to a new level
//     correlated with the last (lognormal, std-dev Noise.SessionCV), plus
//     short throttle episodes (mean Noise.ThrottleEvery apart, each
//     Noise.ThrottleFor long, Noise.ThrottleSlowdown slower);
//   - drift: a slow linear change of Noise.DriftPerHour per hour since start;
//   - jitter: an independent normal factor on every step (Jitter).
//
// Seed fixes jitter, clock states, throttles and error injection; the card
// comes from InstanceSeed (or from Seed when that is 0). Two engines started
// with the same seeds have the same noise as a function of time since start;
// give each engine start its own Seed to get session-to-session variation,
// and each simulated card its own InstanceSeed.
package sim
