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
// delivered, not how fast they were decoded: on a loaded 2-core machine
// (load average 32–34) 62–73% of Ollama's gaps were that short, median
// ITL 0 (testdata/ollama-0.9.6-itls-*.json), and at load 26–38 issue 36
// saw 74–95% and a median TPOT of 0.004 ms. Fewer than minDeliveryGaps
// gaps are not judged.
const (
	BurstGap        = 100 * time.Microsecond
	MaxBurstShare   = 0.5
	minDeliveryGaps = 10
)

// deliveryCheck judges how the successful requests' tokens arrived; nil
// when the run had no inter-token gaps (unstreamed, or one token each).
// Where the engine stamps each token (Ollama's created_at), the share of
// its own gaps under BurstGap says how much of the bursting the engine
// did before the tokens left it.
func deliveryCheck(recs []record) *result.Delivery {
	var gaps, engine []float64
	for i := range recs {
		if recs[i].ok {
			gaps = append(gaps, recs[i].itl...)
			engine = append(engine, recs[i].engineITL...)
		}
	}
	d := judgeDelivery(gaps)
	if d == nil || len(engine) == 0 {
		return d
	}
	d.EngineGaps = len(engine)
	d.EngineBurstShare = burstShare(engine)
	if d.DeliveryBound {
		d.Reason += fmt.Sprintf("; the engine's own stamps put %.0f%% of its gaps under %g ms, so %s",
			100*d.EngineBurstShare, d.BurstGapMS, burstSide(d.EngineBurstShare, d.BurstShare))
	}
	return d
}

// burstSide says where most of the bursting happened.
func burstSide(engine, client float64) string {
	if engine > MaxBurstShare {
		return "the engine sent them in bursts"
	}
	if engine < client/2 {
		return "most bursts formed after the engine, on the way to the client or in reading"
	}
	return "the bursts formed both in the engine and on the way to the client"
}

func burstShare(gaps []float64) float64 {
	limit := BurstGap.Seconds()
	n := 0
	for _, g := range gaps {
		if g < limit {
			n++
		}
	}
	return float64(n) / float64(len(gaps))
}

// judgeDelivery classifies inter-token gaps (seconds).
func judgeDelivery(gaps []float64) *result.Delivery {
	if len(gaps) == 0 {
		return nil
	}
	sorted := append([]float64(nil), gaps...)
	sort.Float64s(sorted)
	d := &result.Delivery{
		Gaps:        len(gaps),
		BurstGapMS:  BurstGap.Seconds() * 1000,
		BurstShare:  burstShare(gaps),
		MedianITLMS: percentile(sorted, 50) * 1000,
	}
	if d.Gaps >= minDeliveryGaps && d.BurstShare > MaxBurstShare {
		d.DeliveryBound = true
		d.Reason = fmt.Sprintf("%.0f%% of %d inter-token gaps under %g ms (median ITL %.3f ms): tokens reached the client in bursts, so TPOT and ITL measure delivery, not decoding",
			100*d.BurstShare, d.Gaps, d.BurstGapMS, d.MedianITLMS)
	}
	return d
}
