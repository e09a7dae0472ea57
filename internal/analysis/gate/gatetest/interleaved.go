package gatetest

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Noise is how an interleaved job's runs vary: each engine start draws a
// shift with StartSD, each run one with RunSD, both in log space.
type Noise struct {
	StartSD, RunSD float64
}

// InterleavedJob makes one interleaved job's runs in the agent's order:
// pairs alternate B H, H B (ABBA), a side's engine starts when the order
// changes side, so neighbouring runs share a start and its shift. The head
// is slower by delta (log space) in TPOT and output throughput. Each
// result carries its place in the job, as the agent writes it.
func InterleavedJob(rng *rand.Rand, job int64, pairs int, delta float64, n Noise) []gate.SidedRun {
	var out []gate.SidedRun
	side, shift, seq := "", 0.0, 0
	run := func(pair int, sd string) {
		if sd != side {
			side, shift = sd, n.StartSD*rng.NormFloat64()
		}
		d := 0.0
		if sd == gate.SideHead {
			d = delta
		}
		x := shift + n.RunSD*rng.NormFloat64() + d
		sec := Section()
		sec.Place = &result.Place{Job: job, Side: sd, Pair: pair, Seq: seq}
		r := &result.Result{Completed: 1000, Metrics: map[string]float64{"median_tpot_ms": 17.6 * math.Exp(x), "p99_ttft_ms": 182.4 * math.Exp(x/2)},
			OutputThroughput: 2205.3 * math.Exp(-x), Perfgate: sec}
		out = append(out, gate.SidedRun{Session: strconv.FormatInt(job, 10), Side: sd, Pair: pair, Seq: seq, Result: r})
		seq++
	}
	for i := range pairs {
		if i%2 == 1 {
			run(i, gate.SideHead)
			run(i, gate.SideBase)
		} else {
			run(i, gate.SideBase)
			run(i, gate.SideHead)
		}
	}
	return out
}
