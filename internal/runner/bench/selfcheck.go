package bench

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Self-check limits. Past one, the client, not the engine, set the pace:
// requests left late, so the engine saw less load than was offered, or
// the client's CPU was saturated, so it read tokens late (which inflates
// TTFT and ITL). Lateness is judged against the run's own time scale, so
// a few milliseconds of scheduling noise on a busy machine do not condemn
// a run whose requests last a second:
//   - arrivals at a rate (or a trace's timestamps) are late when the p99
//     lag exceeds a quarter of the mean gap between arrivals, and at least
//     DefaultMaxScheduleLag;
//   - under a concurrency cap, a late request leaves its slot idle: the
//     run is client-bound when slots idled more than MaxIdleSlots of the
//     time (mean lag over mean end-to-end latency);
//   - with the engine's own /metrics, the client's mean TTFT may exceed
//     the server's (vllm:time_to_first_token_seconds, from the request's
//     arrival to its first token) by the network and the client's own
//     delays in sending and reading. Past MaxTTFTGapShare of the server's
//     mean TTFT, and at least DefaultMaxTTFTGap, the client read its
//     tokens late: a receive-side bias no lag or CPU figure of its own
//     shows (a client starved of CPU reads its sockets late, and its own
//     clock cannot tell).
//
// Lag is measured from when a request was due to when its last byte was
// written to the socket (when the server can see it), not to when the
// client began to send it.
const (
	DefaultMaxScheduleLag = 10 * time.Millisecond
	MaxIdleSlots          = 0.05
	DefaultMaxClientCPU   = 0.9 // of the process's usable cores
	DefaultMaxTTFTGap     = 10 * time.Millisecond
	MaxTTFTGapShare       = 0.05
)

// cpuMark is a reading of the process's CPU time and the wall clock.
type cpuMark struct {
	cpu  time.Duration
	ok   bool
	wall time.Time
}

func markCPU() cpuMark {
	c, ok := processCPU()
	return cpuMark{cpu: c, ok: ok, wall: time.Now()}
}

// selfCheck judges the measured phase from its records (each knows when
// it was due and when it left), the CPU used between from and to, and the
// engine's own TTFT when sm has it (nil: no /metrics).
func selfCheck(recs []record, o *Options, from, to cpuMark, sm *result.ServerMetrics) *result.ClientCheck {
	c := &result.ClientCheck{RequestedRate: o.RequestRate, CPUShared: o.CPUShared}
	var lags []float64
	var first, last time.Time
	var e2e float64
	sent, done := 0, 0
	for i := range recs {
		r := &recs[i]
		if r.start.IsZero() {
			continue
		}
		sent++
		if first.IsZero() || r.start.Before(first) {
			first = r.start
		}
		if r.start.After(last) {
			last = r.start
		}
		if !r.due.IsZero() {
			left := r.sent
			if left.IsZero() {
				left = r.start // never written: it failed to connect
			}
			lags = append(lags, max(0, left.Sub(r.due).Seconds()*1000))
		}
		if r.ok {
			e2e += r.latency * 1000
			done++
		}
	}
	sort.Float64s(lags)
	if len(lags) > 0 {
		c.ScheduleLagP50MS = percentile(lags, 50)
		c.ScheduleLagP99MS = percentile(lags, 99)
		c.ScheduleLagMaxMS = lags[len(lags)-1]
	}
	span := last.Sub(first).Seconds()
	if sent > 1 && span > 0 {
		c.AchievedRate = float64(sent-1) / span
	}
	wall := to.wall.Sub(from.wall).Seconds()
	if from.ok && to.ok && wall > 0 {
		c.Cores = runtime.GOMAXPROCS(0)
		c.CPUSeconds = (to.cpu - from.cpu).Seconds()
		c.CPUUtilization = c.CPUSeconds / wall / float64(c.Cores)
	}

	var why []string
	if reason := scheduleLagCheck(c, o, sent, span); reason != "" {
		why = append(why, reason)
	}
	if o.MaxConcurrency > 0 && done > 0 && len(lags) > 0 {
		idle := mean(lags) / (e2e / float64(done))
		if idle > MaxIdleSlots {
			why = append(why, fmt.Sprintf("concurrency slots idled %.1f%% of the time (mean schedule lag %.1f ms, mean request %.0f ms): requests left late",
				100*idle, mean(lags), e2e/float64(done)))
		}
	}
	maxCPU := o.MaxClientCPU
	if maxCPU == 0 {
		maxCPU = DefaultMaxClientCPU
	}
	if c.Cores > 0 && !o.CPUShared && c.CPUUtilization >= maxCPU {
		why = append(why, fmt.Sprintf("client CPU %.0f%% of %d core(s) ≥ %.0f%%: tokens were read late", 100*c.CPUUtilization, c.Cores, 100*maxCPU))
	}
	if reason := ttftGapCheck(sm, o.MaxTTFTGap); reason != "" {
		why = append(why, reason)
	}
	c.Delivery = deliveryCheck(recs)
	if len(why) > 0 {
		c.ClientBound = true
		c.Reason = strings.Join(why, "; ")
	}
	return c
}

// scheduleLagCheck says why requests left late, or "": their lag p99
// above a quarter of the mean gap between arrivals (at least
// --max-schedule-lag). With an unpaced run it says nothing.
func scheduleLagCheck(c *result.ClientCheck, o *Options, sent int, span float64) string {
	maxLag := o.MaxScheduleLag
	if maxLag == 0 {
		maxLag = DefaultMaxScheduleLag
	}
	// With an infinite rate and no cap every request is due at once, and
	// the lag measures how long a burst takes to leave, not lateness.
	paced := !o.RequestRate.IsInf() || isTrace(o.Dataset)
	gapMS := 0.0
	switch {
	case !o.RequestRate.IsInf() && o.RequestRate > 0:
		gapMS = 1000 / float64(o.RequestRate)
	case sent > 1:
		gapMS = span / float64(sent-1) * 1000
	}
	if paced && sent > 1 {
		limit := max(float64(maxLag)/float64(time.Millisecond), 0.25*gapMS)
		if c.ScheduleLagP99MS > limit {
			return fmt.Sprintf("schedule lag p99 %.1f ms > %.1f ms (a quarter of the mean gap between arrivals, at least %s): requests left late",
				c.ScheduleLagP99MS, limit, maxLag)
		}
	}
	return ""
}

// ttftGapCheck compares the client's mean TTFT with the engine's own. The
// means are used, not the medians: the server's median is interpolated
// within histogram buckets tens of milliseconds wide, its mean is exact.
// It returns why the gap is too wide, or "".
func ttftGapCheck(sm *result.ServerMetrics, maxGap time.Duration) string {
	if sm == nil || sm.TTFTGap == nil || sm.TTFT == nil || sm.TTFT.Count <= 0 {
		return ""
	}
	if maxGap == 0 {
		maxGap = DefaultMaxTTFTGap
	}
	limit := max(float64(maxGap)/float64(time.Millisecond), MaxTTFTGapShare*sm.TTFT.MeanMS)
	if gap := sm.TTFTGap.MeanMS; gap > limit {
		return fmt.Sprintf("client TTFT mean %.1f ms above the server's own (%.1f ms, from its /metrics) > %.1f ms (%.0f%% of the server's, at least %s): the client sent or read late",
			gap, sm.TTFT.MeanMS, limit, 100*MaxTTFTGapShare, maxGap)
	}
	return ""
}
