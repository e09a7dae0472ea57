package fleet

import (
	"container/heap"
	"slices"
	"sort"
	"time"
)

// The estimator before issue 23, kept to show that the calibration test
// can fail: a replay of the queue as it stands (no work arrives, nothing
// overtakes) on the median of the last 20 run times of a tier and pool,
// every job counted as at least a minute; a running job's remaining time
// is the median less what it ran, at least 0.

type oldDurations struct {
	byPool map[[2]string]time.Duration
	byTier map[string]time.Duration
}

func newOldDurations(samples []Sample) oldDurations {
	pool := map[[2]string][]time.Duration{}
	tier := map[string][]time.Duration{}
	for _, s := range samples {
		if s.Took <= 0 {
			continue
		}
		k := [2]string{s.Tier, s.Pool}
		if len(pool[k]) < RecentWindow {
			pool[k] = append(pool[k], s.Took)
		}
		if len(tier[s.Tier]) < RecentWindow {
			tier[s.Tier] = append(tier[s.Tier], s.Took)
		}
	}
	d := oldDurations{byPool: map[[2]string]time.Duration{}, byTier: map[string]time.Duration{}}
	for k, v := range pool {
		d.byPool[k] = oldMedian(v)
	}
	for k, v := range tier {
		d.byTier[k] = oldMedian(v)
	}
	return d
}

func (d oldDurations) Of(tier, pool string) time.Duration {
	if v, ok := d.byPool[[2]string{tier, pool}]; ok {
		return v
	}
	if v, ok := d.byTier[tier]; ok {
		return v
	}
	return DefaultDuration(tier)
}

func oldMedian(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// oldEstimate is the old Estimate: the wait of each queued job.
func oldEstimate(queue []Queued, runners []Runner, dur func(tier, pool string) time.Duration) map[int64]time.Duration {
	out := make(map[int64]time.Duration, len(queue))
	poolOf := make([]int, len(queue))
	index := map[string]int{}
	var pools []Queued
	var jobsIn [][]int
	for i, q := range queue {
		key := q.Pool()
		p, ok := index[key]
		if !ok {
			p = len(pools)
			index[key] = p
			pools = append(pools, q)
			jobsIn = append(jobsIn, nil)
		}
		poolOf[i] = p
		jobsIn[p] = append(jobsIn[p], i)
	}
	var avail []Runner
	for _, r := range runners {
		if r.Available {
			avail = append(avail, r)
		}
	}
	serves := make([][]int, len(avail))
	for ri, r := range avail {
		for p, q := range pools {
			if r.CanRun(q) {
				serves[ri] = append(serves[ri], p)
			}
		}
	}
	h := make(runnerHeap, 0, len(avail))
	for ri, r := range avail {
		if len(serves[ri]) > 0 {
			h = append(h, freeAt{runner: ri, at: max(r.BusyFor, 0)})
		}
	}
	heap.Init(&h)
	cursor := make([]int, len(pools))
	for h.Len() > 0 {
		f := heap.Pop(&h).(freeAt)
		best, bestIdx := -1, len(queue)
		for _, p := range serves[f.runner] {
			if cursor[p] < len(jobsIn[p]) && jobsIn[p][cursor[p]] < bestIdx {
				best, bestIdx = p, jobsIn[p][cursor[p]]
			}
		}
		if best < 0 {
			continue
		}
		cursor[best]++
		q := queue[bestIdx]
		out[q.ID] = f.at
		f.at += max(dur(q.Tier, q.Pool()), time.Minute)
		heap.Push(&h, f)
	}
	return out
}
