package bench

import (
	"fmt"
	"sort"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Delivery limits. No engine decodes a token in under BurstGap, so a gap
// that short between two token events is a token that arrived with the
// one before it: both sat in a buffer (the engine's, the kernel's, or a
// starved client's socket it read late) and came in one read, when the
// client gives them one instant. When more than MaxBurstShare of a run's
// gaps are that short, its TPOT and ITL measure how the tokens were
// delivered, not how fast they were decoded (on a loaded 2-core machine
// Ollama's tokens came 74–95% in bursts, median ITL 0 and median TPOT
// 0.004 ms). Fewer than minDeliveryGaps gaps are not judged.
const (
	BurstGap        = 100 * time.Microsecond
	MaxBurstShare   = 0.5
	minDeliveryGaps = 10
)

// deliveryCheck judges how the successful requests' tokens arrived; nil
// when the run had no inter-token gaps (unstreamed, or one token each).
func deliveryCheck(recs []record) *result.Delivery {
	var gaps []float64
	for i := range recs {
		if recs[i].ok {
			gaps = append(gaps, recs[i].itl...)
		}
	}
	return judgeDelivery(gaps)
}

// judgeDelivery classifies inter-token gaps (seconds).
func judgeDelivery(gaps []float64) *result.Delivery {
	if len(gaps) == 0 {
		return nil
	}
	limit := BurstGap.Seconds()
	burst := 0
	for _, g := range gaps {
		if g < limit {
			burst++
		}
	}
	sorted := append([]float64(nil), gaps...)
	sort.Float64s(sorted)
	d := &result.Delivery{
		Gaps:        len(gaps),
		BurstGapMS:  limit * 1000,
		BurstShare:  float64(burst) / float64(len(gaps)),
		MedianITLMS: percentile(sorted, 50) * 1000,
	}
	if d.Gaps >= minDeliveryGaps && d.BurstShare > MaxBurstShare {
		d.DeliveryBound = true
		d.Reason = fmt.Sprintf("%.0f%% of %d inter-token gaps under %g ms (median ITL %.3f ms): tokens reached the client in bursts, so TPOT and ITL measure delivery, not decoding",
			100*d.BurstShare, d.Gaps, d.BurstGapMS, d.MedianITLMS)
	}
	return d
}
