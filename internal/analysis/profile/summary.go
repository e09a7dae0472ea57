package profile

import (
	"slices"
	"time"
)

// Summary is one trace reduced to where its time went.
type Summary struct {
	Steps                                     int
	Span                                      time.Duration // first step start to last step end
	Busy                                      time.Duration // sum of step times
	Idle                                      time.Duration // sum of idle spans
	IdleGaps                                  int
	IdleGapP50, IdleGapP99                    time.Duration
	StepMean, StepP50, StepP90, StepP99       time.Duration
	DecodeSteps, PrefillSteps, MixedSteps     int
	DecodeStepP50, MixedStepP50               time.Duration
	DecodeTime, PrefillTime, MixedTime        time.Duration // busy time by step kind
	InterruptionRate                          float64       // mixed steps / steps that decoded
	BatchMean                                 float64
	BatchP50, BatchP90, BatchMax              int
	BatchHist                                 []int // steps per BatchBuckets bucket
	PrefillTokens, CachedTokens, DecodeTokens int
	Preemptions                               int
	KVUsageMean, KVUsageMax                   float64
}

// BatchBuckets are the upper bounds of the batch-size histogram; the last
// bucket holds everything larger.
var BatchBuckets = []int{1, 4, 8, 16, 32, 64, 128, 256}

// Summarize reduces t.
func Summarize(t *Trace) Summary {
	var s Summary
	s.Steps = len(t.Steps)
	s.BatchHist = make([]int, len(BatchBuckets)+1)
	if s.Steps == 0 {
		return s
	}
	all := make([]time.Duration, 0, s.Steps)
	var decode, mixed []time.Duration
	batches := make([]int, 0, s.Steps)
	var first, last time.Duration = t.Steps[0].Start, 0
	for _, st := range t.Steps {
		first = min(first, st.Start)
		last = max(last, st.Start+st.Dur)
		s.Busy += st.Dur
		all = append(all, st.Dur)
		switch st.Kind() {
		case Decode:
			s.DecodeSteps++
			s.DecodeTime += st.Dur
			decode = append(decode, st.Dur)
		case Prefill:
			s.PrefillSteps++
			s.PrefillTime += st.Dur
		case Mixed:
			s.MixedSteps++
			s.MixedTime += st.Dur
			mixed = append(mixed, st.Dur)
		}
		b := st.Batch()
		batches = append(batches, b)
		s.BatchMax = max(s.BatchMax, b)
		s.BatchMean += float64(b)
		i, _ := slices.BinarySearch(BatchBuckets, b)
		s.BatchHist[i]++
		s.PrefillTokens += st.PrefillTokens
		s.CachedTokens += st.CachedTokens
		s.DecodeTokens += st.DecodeTokens
		s.Preemptions += st.Preemptions
		s.KVUsageMean += st.KVUsage
		s.KVUsageMax = max(s.KVUsageMax, st.KVUsage)
	}
	n := float64(s.Steps)
	s.Span = last - first
	s.StepMean = s.Busy / time.Duration(s.Steps)
	s.BatchMean /= n
	s.KVUsageMean /= n
	slices.Sort(all)
	s.StepP50, s.StepP90, s.StepP99 = quantile(all, 0.5), quantile(all, 0.9), quantile(all, 0.99)
	slices.Sort(decode)
	slices.Sort(mixed)
	s.DecodeStepP50, s.MixedStepP50 = quantile(decode, 0.5), quantile(mixed, 0.5)
	slices.Sort(batches)
	s.BatchP50, s.BatchP90 = quantile(batches, 0.5), quantile(batches, 0.9)
	if d := s.DecodeSteps + s.MixedSteps; d > 0 {
		s.InterruptionRate = float64(s.MixedSteps) / float64(d)
	}
	gaps := make([]time.Duration, 0, len(t.Idle))
	for _, sp := range t.Idle {
		s.Idle += sp.Dur
		gaps = append(gaps, sp.Dur)
	}
	s.IdleGaps = len(gaps)
	slices.Sort(gaps)
	s.IdleGapP50, s.IdleGapP99 = quantile(gaps, 0.5), quantile(gaps, 0.99)
	return s
}

// IdleFraction is the share of busy plus idle time spent idle.
func (s Summary) IdleFraction() float64 {
	if s.Busy+s.Idle == 0 {
		return 0
	}
	return float64(s.Idle) / float64(s.Busy+s.Idle)
}

// MixedShare is the share of busy time in steps that both prefilled and
// decoded.
func (s Summary) MixedShare() float64 { return share(s.MixedTime, s.Busy) }

// DecodeShare is the share of busy time in decode-only steps.
func (s Summary) DecodeShare() float64 { return share(s.DecodeTime, s.Busy) }

// PrefillShare is the share of busy time in prefill-only steps.
func (s Summary) PrefillShare() float64 { return share(s.PrefillTime, s.Busy) }

// CachedShare is the share of admitted prompt tokens found in the prefix
// cache.
func (s Summary) CachedShare() float64 {
	if s.CachedTokens+s.PrefillTokens == 0 {
		return 0
	}
	return float64(s.CachedTokens) / float64(s.CachedTokens+s.PrefillTokens)
}

// PreemptionsPerKStep is preemptions per thousand steps.
func (s Summary) PreemptionsPerKStep() float64 {
	if s.Steps == 0 {
		return 0
	}
	return 1000 * float64(s.Preemptions) / float64(s.Steps)
}

// PrefillTokensPerStep is the mean prompt tokens computed by a step that
// computed any.
func (s Summary) PrefillTokensPerStep() float64 {
	if n := s.PrefillSteps + s.MixedSteps; n > 0 {
		return float64(s.PrefillTokens) / float64(n)
	}
	return 0
}

func share(part, whole time.Duration) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// quantile is the nearest-rank quantile of sorted values; zero when empty.
func quantile[T any](sorted []T, q float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
