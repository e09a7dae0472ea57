// Package soak judges a long run's trends: whether an engine's memory
// grows (a leak), its prefix-cache hit rate drifts down, its KV usage
// creeps up or its latency creeps up while the offered load stays the
// same. The package is pure: the runner agent samples the engine process's
// RSS, its GPU memory, the server's /metrics and the client's latencies
// into Samples; Judge fits each series with a robust slope (Theil–Sen: the
// median of the pairwise slopes, which GC sawtooth, a scrape that lands
// mid-step or a throttle episode cannot drag) after a warm-up, and holds
// the slope per hour against the repository's thresholds. A slope is only
// a finding when the growth it implies over the run also clears the
// series' noise floor, so a short run's few megabytes of heap settling do
// not extrapolate into a leak.
package soak
