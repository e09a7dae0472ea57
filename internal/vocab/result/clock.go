package result

// Delivery is how the tokens of a streamed run reached the client. When
// most inter-token gaps are shorter than any decode step (tokens queued
// in the engine's or the kernel's buffers, or read late by a starved
// client, and arrived together), the run's TPOT and ITL measure
// delivery, not decoding: DeliveryBound is set and Reason says why. The
// run's other figures (TTFT, throughput, the engine's CPU per token)
// stand.
type Delivery struct {
	// Gaps is how many inter-token gaps of successful requests were
	// judged; BurstGapMS the limit under which a gap counts as a token
	// that arrived with the one before it; BurstShare the share of gaps
	// under it.
	Gaps       int     `json:"gaps"`
	BurstGapMS float64 `json:"burst_gap_ms"`
	BurstShare float64 `json:"burst_share"`
	// MedianITLMS is the median of those gaps (0 when most came at once).
	MedianITLMS float64 `json:"median_itl_ms"`
	// EngineGaps and EngineBurstShare are the same for the engine's own
	// stamps of the tokens, where its stream has them (Ollama's
	// created_at, stamped as its server takes each token from its runner):
	// bursts there formed in the engine, not on the way to the client.
	EngineGaps       int     `json:"engine_gaps,omitempty"`
	EngineBurstShare float64 `json:"engine_burst_share,omitempty"`
	DeliveryBound    bool    `json:"delivery_bound"`
	Reason           string  `json:"reason,omitempty"`
}

// TPOTDeliveryBound says whether the run's TPOT and ITL measure how the
// tokens were delivered rather than decoded, and why.
func (r *Result) TPOTDeliveryBound() (string, bool) {
	if r == nil || r.Perfgate == nil || r.Perfgate.Client == nil || r.Perfgate.Client.Delivery == nil {
		return "", false
	}
	d := r.Perfgate.Client.Delivery
	return d.Reason, d.DeliveryBound
}

// EngineClock sets the client's timings beside the engine's own for the
// same requests, where the engine reports them per request (Ollama's
// native /api/generate: load_duration, prompt_eval_duration,
// eval_duration, eval_count in its last chunk). Medians over the
// successful requests that carried them, in ms.
type EngineClock struct {
	Engine   string `json:"engine"` // "ollama"
	Requests int    `json:"requests"`
	// ClientTTFTMS is the client's TTFT; EngineTTFTMS the engine's load
	// and prompt evaluation (Ollama's load_duration + prompt_eval_duration),
	// which leave out the HTTP path, the wait for a slot and sampling the
	// first token.
	ClientTTFTMS float64 `json:"client_ttft_ms"`
	EngineTTFTMS float64 `json:"engine_ttft_ms"`
	// ClientTPOTMS is the client's TPOT on these requests, (latency − TTFT)
	// / (output tokens − 1): the gaps after the first token. EngineTPOTMS
	// is the engine's own figure, eval_duration / eval_count, and
	// EngineStepMS is eval_duration / (eval_count − 1). Ollama counts the
	// first token in eval_count although it was sampled from the prompt
	// pass, yet its eval_duration also holds about one step more than the
	// client's first-to-last-token span (the first token's sampling and
	// hand-off, the sequence's removal): measured on Ollama v0.9.6, the
	// client's TPOT matches eval_duration / eval_count, not the step
	// (docs/real-engine.md).
	ClientTPOTMS float64 `json:"client_tpot_ms"`
	EngineTPOTMS float64 `json:"engine_tpot_ms"`
	EngineStepMS float64 `json:"engine_step_ms"`
	// TPOTGap and StepGap are the medians of the per-request ratios
	// client TPOT / engine TPOT − 1 and client TPOT / engine step − 1.
	TPOTGap float64 `json:"tpot_gap"`
	StepGap float64 `json:"step_gap"`
	// EngineWaitMS is the engine's total_duration less load, prompt
	// evaluation and evaluation: queueing for a slot, templating, and the
	// final response.
	EngineWaitMS float64 `json:"engine_wait_ms"`
	// OutputTokens is the median eval_count.
	OutputTokens float64 `json:"output_tokens"`
}
