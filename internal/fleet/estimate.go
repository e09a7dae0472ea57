package fleet

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Queued is one queued job as the estimate sees it. Estimate takes them in
// claim order.
type Queued struct {
	ID      int64
	Tier    string
	Labels  []string // the runner labels the job requires
	GPUUUID string   // the card it is pinned to, if any
}

// Pool is the set of runners a job can go to, named by what it asks:
// its labels, sorted, and its card pin ("gpu,h100" or "gpu@GPU-1234…").
func (q Queued) Pool() string { return Pool(q.Labels, q.GPUUUID) }

// Pool names the pool of a job requiring labels and pinned to gpu ("" for
// none).
func Pool(labels []string, gpu string) string {
	l := slices.Clone(labels)
	slices.Sort(l)
	p := strings.Join(slices.Compact(l), ",")
	if gpu != "" {
		p += "@" + gpu
	}
	return p
}

// Runner is a runner as the estimate sees it.
type Runner struct {
	Name     string
	Labels   []string
	GPUUUIDs []string
	// Available: online (seen recently) and not drained. Others take no
	// new work.
	Available bool
	// BusyFor is how much longer its current job is expected to run; 0
	// when idle.
	BusyFor time.Duration
}

// CanRun reports whether the runner can take the job: it has every label
// the job asks for and, for a pinned job, the card.
func (r Runner) CanRun(q Queued) bool {
	for _, l := range q.Labels {
		if !slices.Contains(r.Labels, l) {
			return false
		}
	}
	return q.GPUUUID == "" || slices.Contains(r.GPUUUIDs, q.GPUUUID)
}

// Place is where a queued job stands.
type Place struct {
	// Ahead counts the queued jobs before it in claim order that compete
	// for the runners it can use.
	Ahead int
	// Wait is the expected time until a runner starts it.
	Wait time.Duration
	// NoRunner: no available runner can take it (none has its labels or
	// its card, or those that have are drained or offline). Wait is then
	// unknown.
	NoRunner bool
}

// DurationFunc is the expected run time of a job of tier in pool.
type DurationFunc func(tier, pool string) time.Duration

// Estimate places every queued job: how many jobs are ahead of it, and
// when a runner should start it if every job runs as long as recent jobs
// of its tier and pool did. It replays the claim: the runner that frees
// up first takes the first job in claim order it can run. Its cost is
// linear in the queue times the number of distinct pools.
func Estimate(queue []Queued, runners []Runner, dur DurationFunc) map[int64]Place {
	out := make(map[int64]Place, len(queue))
	// Pools and the jobs in each, in claim order.
	poolOf := make([]int, len(queue))
	index := map[string]int{}
	var pools []Queued // a representative job of each pool
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
	// Which available runners serve which pools.
	var avail []Runner
	for _, r := range runners {
		if r.Available {
			avail = append(avail, r)
		}
	}
	serves := make([][]int, len(avail)) // runner → pools
	servedBy := make([][]int, len(pools))
	for ri, r := range avail {
		for p, q := range pools {
			if r.CanRun(q) {
				serves[ri] = append(serves[ri], p)
				servedBy[p] = append(servedBy[p], ri)
			}
		}
	}
	// compete[p][q]: some runner serves both, so q's jobs delay p's.
	compete := make([][]bool, len(pools))
	for p := range pools {
		compete[p] = make([]bool, len(pools))
		compete[p][p] = true
		for _, ri := range servedBy[p] {
			for _, q := range serves[ri] {
				compete[p][q] = true
			}
		}
	}
	seen := make([]int, len(pools)) // jobs of each pool passed so far
	for i, q := range queue {
		p := poolOf[i]
		ahead := 0
		for other, n := range seen {
			if compete[p][other] {
				ahead += n
			}
		}
		out[q.ID] = Place{Ahead: ahead, NoRunner: len(servedBy[p]) == 0}
		seen[p]++
	}
	// Replay the claims.
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
			continue // nothing left it can run
		}
		cursor[best]++
		q := queue[bestIdx]
		pl := out[q.ID]
		pl.Wait = f.at
		out[q.ID] = pl
		f.at += max(dur(q.Tier, q.Pool()), time.Minute)
		heap.Push(&h, f)
	}
	return out
}

type freeAt struct {
	runner int
	at     time.Duration
}

type runnerHeap []freeAt

func (h runnerHeap) Len() int { return len(h) }
func (h runnerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].runner < h[j].runner
}
func (h runnerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runnerHeap) Push(x any)   { *h = append(*h, x.(freeAt)) }
func (h *runnerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Note is the line a queued check shows: "3 ahead, about 12 min". Times
// are rounded (to the minute under 10 min, to 5 min under an hour, to 10
// min beyond) so that the line changes only when the wait really moves.
func (p Place) Note(q Queued) string {
	ahead := "next in line"
	switch {
	case p.Ahead == 1:
		ahead = "1 ahead"
	case p.Ahead > 1:
		ahead = fmt.Sprintf("%d ahead", p.Ahead)
	}
	if p.NoRunner {
		return ahead + ", " + waitingFor(q)
	}
	if p.Wait < 30*time.Second {
		if p.Ahead == 0 {
			return ahead + ", starting now"
		}
		return ahead + ", under a minute"
	}
	return ahead + ", about " + Minutes(p.Wait)
}

func waitingFor(q Queued) string {
	if q.GPUUUID != "" {
		return "waiting for card " + q.GPUUUID + " (its runner is offline or drained)"
	}
	if len(q.Labels) == 0 {
		return "waiting for a runner (none is online)"
	}
	return "waiting for a runner labelled " + strings.Join(q.Labels, ", ") + " (none is online and undrained)"
}

// Minutes writes a duration for people, rounded: "4 min", "25 min",
// "1 h 20 min".
func Minutes(d time.Duration) string {
	m := int((d + 30*time.Second) / time.Minute)
	switch {
	case m < 1:
		return "under a minute"
	case m < 10:
		return fmt.Sprintf("%d min", m)
	case m < 60:
		m = (m + 2) / 5 * 5
		if m < 60 {
			return fmt.Sprintf("%d min", m)
		}
	}
	m = (m + 5) / 10 * 10
	if m%60 == 0 {
		return fmt.Sprintf("%d h", m/60)
	}
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}

// Default run times by tier, used until the fleet has finished jobs of a
// tier to learn from.
var defaultDurations = map[string]time.Duration{
	"quick":   10 * time.Minute,
	"merge":   30 * time.Minute,
	"nightly": 60 * time.Minute,
}

// DefaultDuration is the run time assumed for a tier with no history.
func DefaultDuration(tier string) time.Duration {
	if d, ok := defaultDurations[tier]; ok {
		return d
	}
	return 20 * time.Minute
}

// Sample is one finished attempt: its tier, pool and GPU time.
type Sample struct {
	Tier, Pool string
	Took       time.Duration
}

// Durations estimates run times from recent finished attempts: the median
// of the most recent (up to 20) of the tier in the pool, else of the
// tier, else the tier's default.
type Durations struct {
	byPool map[[2]string]time.Duration
	byTier map[string]time.Duration
}

// RecentWindow is how many recent attempts per tier and pool estimates
// use.
const RecentWindow = 20

// NewDurations learns from samples given newest first.
func NewDurations(samples []Sample) Durations {
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
	d := Durations{byPool: map[[2]string]time.Duration{}, byTier: map[string]time.Duration{}}
	for k, v := range pool {
		d.byPool[k] = median(v)
	}
	for k, v := range tier {
		d.byTier[k] = median(v)
	}
	return d
}

// Of is the expected run time of a job of tier in pool.
func (d Durations) Of(tier, pool string) time.Duration {
	if v, ok := d.byPool[[2]string{tier, pool}]; ok {
		return v
	}
	if v, ok := d.byTier[tier]; ok {
		return v
	}
	return DefaultDuration(tier)
}

func median(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
