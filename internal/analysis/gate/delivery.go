package gate

import (
	"fmt"
	"math"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// delivery says, when some runs' tokens reached the client in bursts
// (the client's check marked their TPOT and ITL delivery-bound), how many
// and how bursty; "" otherwise. Unlike a client-bound run, such a run is
// kept: its TTFT, throughput and engine CPU per token stand, only its
// TPOT and ITL measured delivery rather than decoding.
func delivery(runs []*result.Result) string {
	n := 0
	share, itl, limit := 0.0, math.Inf(1), 0.0
	for _, r := range runs {
		if _, bound := r.TPOTDeliveryBound(); !bound {
			continue
		}
		d := r.Perfgate.Client.Delivery
		n++
		share, itl, limit = math.Max(share, d.BurstShare), math.Min(itl, d.MedianITLMS), math.Max(limit, d.BurstGapMS)
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("TPOT and ITL are delivery-bound in %d of %d runs (up to %.0f%% of inter-token gaps under %g ms, median ITL down to %.3f ms): tokens reached the benchmark client in bursts, so those runs' TPOT and ITL measure delivery, not decoding; their TTFT, throughput and engine CPU per token stand",
		n, len(runs), 100*share, limit, itl)
}
