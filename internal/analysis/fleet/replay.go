package fleet

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Place is where a queued job stands.
type Place struct {
	// Ahead counts the queued jobs before it in claim order that compete
	// for the runners it can use.
	Ahead int
	// Wait is the expected time until a runner starts it; Low and High
	// bound it (see Estimate).
	Wait, Low, High time.Duration
	// NoRunner: no available runner can take it (none has its labels or
	// its card, or those that have are drained or offline). Wait is then
	// unknown.
	NoRunner bool
	// Beyond: the replay gave up at its horizon before a runner took it;
	// it waits more than Wait.
	Beyond bool
}

// Horizon is how far ahead the replay looks.
const Horizon = 48 * time.Hour

// Replays is how many times Estimate replays the claims, each on run
// times and arrivals drawn anew (with the same seeds every time, so the
// same queue gets the same answer).
const Replays = 31

// Forecast is what the queue estimate knows now.
type Forecast struct {
	Queue     []Queued // in claim order
	Runners   []Runner
	Durations Durations
	// Arrivals are the streams of work expected to arrive. A new job
	// overtakes queued ones when its class goes first, or when its
	// tenant's line is shorter than theirs (the fair share).
	Arrivals []Stream
}

// ParsePool is the labels and card pin of a pool named by Pool.
func ParsePool(p string) (labels []string, gpu string) {
	l, gpu, _ := strings.Cut(p, "@")
	if l != "" {
		labels = strings.Split(l, ",")
	}
	return labels, gpu
}

// Estimate places every queued job: how many jobs are ahead of it, and
// when a runner should start it. It replays the claims Replays times: the
// runner that frees up first takes the first job in claim order it can
// run, each job running as long as one of the recent runs of its tier and
// pool (drawn at random; a running job as long as one of those that ran
// longer than it has), with the work that arrives meanwhile — a Poisson
// stream at each observed rate — placed as the store places it: merge
// work first, nightly and bisect work ahead once it has waited its
// AgeAfter, else by class, then by fair-share tag (a new job of a tenant
// without a line starts at the class's virtual time, ahead of longer
// lines). Wait is the median of the replays' waits, or half their 95th
// percentile when that is more; Low and High are their 5th and 95th
// percentiles (RangeLow, RangeHigh; widened to hold Wait). A range of
// quartiles held the wait only half the time, and work the replay cannot
// foresee (drains, bursts, cancellations) moves waits both ways: the
// range holds 80% of waits only at the replays' tails (TestETACalibration). Its cost is Replays times linear in the jobs replayed
// times the pools a runner serves.
func Estimate(f Forecast) map[int64]Place {
	return estimate(f, RangeLow, RangeHigh)
}

// RangeLow and RangeHigh are the quantiles of the replays' waits a
// queued check's range shows: with Replays 31, the second-lowest and
// second-highest.
const (
	RangeLow  = 0.05
	RangeHigh = 0.95
)

// estimate is Estimate with the range at the replays' lo and hi quantiles.
func estimate(f Forecast, lo, hi float64) map[int64]Place {
	var out map[int64]Place
	waits := make(map[int64][]time.Duration, len(f.Queue))
	for k := range Replays {
		r := newReplay(f, rand.New(rand.NewPCG(uint64(k)+1, 23)))
		r.run()
		if out == nil {
			out = r.out
		}
		for id, p := range r.out {
			if !p.NoRunner {
				waits[id] = append(waits[id], p.Wait)
			}
		}
	}
	for id, w := range waits {
		slices.Sort(w)
		p := out[id]
		n := len(w)
		// The median, or half the 95th percentile when that is more: a
		// wait as uncertain as the first free runner's (exponential-like)
		// gets an ETA it rarely exceeds twice over.
		p.Wait = max(w[n/2], w[(n-1)*19/20]/2)
		p.Low, p.High = min(w[quantile(n, lo)], p.Wait), max(w[quantile(n, hi)], p.Wait)
		p.Beyond = p.Wait >= Horizon
		out[id] = p
	}
	return out
}

// quantile is the index of the q quantile of n sorted values.
func quantile(n int, q float64) int {
	return min(int(q*float64(n)), n-1)
}

type rjob struct {
	id    int64 // 0: an arrival the replay expects
	pool  int
	prio  int
	tag   float64
	seq   int
	ages  bool
	ageAt time.Duration
	dur   time.Duration
}

type rpool struct {
	labels  []string
	gpu     string
	classes []int           // ascending
	byClass map[int]*ixHeap // by tag, seq
	aged    *ixHeap         // jobs that age, by ageAt, seq
	runners int             // available runners serving it
}

type rstream struct {
	Stream
	pool int
	next time.Duration
	gap  float64 // mean, in nanoseconds
}

type replay struct {
	f       Forecast
	rng     *rand.Rand
	out     map[int64]Place
	jobs    []rjob
	taken   []bool
	pools   []*rpool
	poolIx  map[string]int
	streams []*rstream
	avail   []Runner
	serves  [][]int // runner → pools
	feeds   [][]int // runner → streams of pools it serves
	vt      map[int]float64
	finish  map[string]float64 // class and tenant → its finish
	left    int                // real jobs some runner serves, not yet placed
}

func finishKey(prio int, tenant string) string {
	return string(rune('0'+prio)) + "\x00" + tenant
}

func newReplay(f Forecast, rng *rand.Rand) *replay {
	r := &replay{f: f, rng: rng, out: make(map[int64]Place, len(f.Queue)), poolIx: map[string]int{},
		vt: map[int]float64{}, finish: map[string]float64{}}
	for _, q := range f.Queue {
		r.pool(q.Pool())
	}
	for _, s := range f.Arrivals {
		if s.Priority > PriorityQuick || s.PerHour <= 0 || math.IsNaN(s.PerHour) || math.IsInf(s.PerHour, 0) {
			continue
		}
		gap := float64(time.Hour) / s.PerHour
		if gap > float64(Horizon) {
			continue
		}
		r.streams = append(r.streams, &rstream{Stream: s, pool: r.pool(s.Pool), gap: gap,
			next: time.Duration(rng.ExpFloat64() * gap)})
	}
	running := map[int]bool{}
	for _, run := range f.Runners {
		if j := run.Job; j != nil && (!running[j.Priority] || j.Tag > r.vt[j.Priority]) {
			running[j.Priority] = true
			r.vt[j.Priority] = j.Tag // the largest running
		}
		if run.Available {
			if run.Job != nil {
				run.BusyFor = f.Durations.DrawLeft(rng, run.Job.Tier, run.Job.Pool, run.Job.Ran)
			}
			r.avail = append(r.avail, run)
		}
	}
	r.serves = make([][]int, len(r.avail))
	r.feeds = make([][]int, len(r.avail))
	for ri, run := range r.avail {
		for p, pl := range r.pools {
			if run.CanRun(Queued{Labels: pl.labels, GPUUUID: pl.gpu}) {
				r.serves[ri] = append(r.serves[ri], p)
				pl.runners++
			}
		}
		for si, s := range r.streams {
			if slices.Contains(r.serves[ri], s.pool) {
				r.feeds[ri] = append(r.feeds[ri], si)
			}
		}
	}
	// Ahead, as before: the queued jobs before it that compete for its
	// runners.
	compete := make([][]bool, len(r.pools))
	for p := range r.pools {
		compete[p] = make([]bool, len(r.pools))
		compete[p][p] = true
	}
	for _, ps := range r.serves {
		for _, p := range ps {
			for _, q := range ps {
				compete[p][q] = true
			}
		}
	}
	seen := make([]int, len(r.pools))
	first := map[int]bool{}
	for i, q := range f.Queue {
		p := r.poolIx[q.Pool()]
		ahead := 0
		for other, n := range seen {
			if compete[p][other] {
				ahead += n
			}
		}
		noRunner := r.pools[p].runners == 0
		r.out[q.ID] = Place{Ahead: ahead, NoRunner: noRunner}
		seen[p]++
		if !noRunner {
			r.left++
		}
		d := f.Durations.Draw(rng, q.Tier, q.Pool())
		r.add(rjob{id: q.ID, pool: p, prio: q.Priority, tag: q.Tag, seq: i, ages: q.Ages, ageAt: q.AgesIn, dur: d})
		if !running[q.Priority] && (!first[q.Priority] || q.Tag < r.vt[q.Priority]) {
			first[q.Priority] = true
			r.vt[q.Priority] = q.Tag // else the smallest queued
		}
		k := finishKey(q.Priority, q.Tenant)
		r.finish[k] = max(r.finish[k], q.Tag+q.Cost)
	}
	return r
}

func (r *replay) pool(name string) int {
	if p, ok := r.poolIx[name]; ok {
		return p
	}
	labels, gpu := ParsePool(name)
	r.poolIx[name] = len(r.pools)
	r.pools = append(r.pools, &rpool{labels: labels, gpu: gpu, byClass: map[int]*ixHeap{}})
	return len(r.pools) - 1
}

// add queues a job in its pool.
func (r *replay) add(j rjob) {
	ix := len(r.jobs)
	r.jobs = append(r.jobs, j)
	r.taken = append(r.taken, false)
	pl := r.pools[j.pool]
	h, ok := pl.byClass[j.prio]
	if !ok {
		h = &ixHeap{less: func(a, b int) bool {
			x, y := r.jobs[a], r.jobs[b]
			if x.tag != y.tag {
				return x.tag < y.tag
			}
			return x.seq < y.seq
		}}
		pl.byClass[j.prio] = h
		pl.classes = append(pl.classes, j.prio)
		slices.Sort(pl.classes)
	}
	heap.Push(h, ix)
	if j.ages && j.prio != PriorityMerge {
		if pl.aged == nil {
			pl.aged = &ixHeap{less: func(a, b int) bool {
				x, y := r.jobs[a], r.jobs[b]
				if x.ageAt != y.ageAt {
					return x.ageAt < y.ageAt
				}
				return x.seq < y.seq
			}}
		}
		heap.Push(pl.aged, ix)
	}
}

// top is the first untaken job of h, or -1.
func (r *replay) top(h *ixHeap) int {
	for h != nil && h.Len() > 0 {
		if ix := h.ix[0]; !r.taken[ix] {
			return ix
		}
		heap.Pop(h)
	}
	return -1
}

// candidate is the job of pool p a claim at t would take, or -1.
func (r *replay) candidate(p int, t time.Duration) int {
	pl := r.pools[p]
	if j := r.top(pl.byClass[PriorityMerge]); j >= 0 {
		return j
	}
	if j := r.top(pl.aged); j >= 0 && r.jobs[j].ageAt <= t {
		return j
	}
	for _, c := range pl.classes {
		if j := r.top(pl.byClass[c]); j >= 0 {
			return j
		}
	}
	return -1
}

// before: a goes before b in a claim at t (the store's claimOrder).
func (r *replay) before(a, b int, t time.Duration) bool {
	x, y := r.jobs[a], r.jobs[b]
	rank := func(j rjob) int {
		switch {
		case j.prio == PriorityMerge:
			return 0
		case j.ages && j.ageAt <= t:
			return 1
		}
		return 2
	}
	rx, ry := rank(x), rank(y)
	if rx != ry {
		return rx < ry
	}
	switch rx {
	case 1:
		if x.ageAt != y.ageAt {
			return x.ageAt < y.ageAt
		}
	case 2:
		if x.prio != y.prio {
			return x.prio < y.prio
		}
		fallthrough
	default:
		if x.tag != y.tag {
			return x.tag < y.tag
		}
	}
	return x.seq < y.seq
}

// arrive queues the work expected to have arrived by t, in time order.
func (r *replay) arrive(t time.Duration) {
	for {
		var s *rstream
		for _, c := range r.streams {
			if c.next <= t && (s == nil || c.next < s.next) {
				s = c
			}
		}
		if s == nil {
			return
		}
		k := finishKey(s.Priority, s.Tenant)
		tag := max(r.vt[s.Priority], r.finish[k])
		r.finish[k] = tag + s.Cost
		j := rjob{pool: s.pool, prio: s.Priority, tag: tag, seq: len(r.jobs), dur: r.f.Durations.Draw(r.rng, s.Tier, s.Pool)}
		if age := AgeAfter(s.Priority); age > 0 {
			j.ages, j.ageAt = true, s.next+age
		}
		r.add(j)
		s.next += time.Duration(r.rng.ExpFloat64() * s.gap)
	}
}

func (r *replay) run() {
	h := make(runnerHeap, 0, len(r.avail))
	for ri, run := range r.avail {
		if len(r.serves[ri]) > 0 {
			h = append(h, freeAt{runner: ri, at: max(run.BusyFor, 0)})
		}
	}
	heap.Init(&h)
	for r.left > 0 && h.Len() > 0 {
		f := heap.Pop(&h).(freeAt)
		if f.at > Horizon {
			break
		}
		r.arrive(f.at)
		best := -1
		for _, p := range r.serves[f.runner] {
			if c := r.candidate(p, f.at); c >= 0 && (best < 0 || r.before(c, best, f.at)) {
				best = c
			}
		}
		if best < 0 {
			// Idle until the next arrival it can run.
			next := time.Duration(-1)
			for _, si := range r.feeds[f.runner] {
				if s := r.streams[si]; next < 0 || s.next < next {
					next = s.next
				}
			}
			if next >= 0 {
				f.at = max(next, f.at)
				heap.Push(&h, f)
			}
			continue
		}
		r.taken[best] = true
		j := r.jobs[best]
		r.vt[j.prio] = max(r.vt[j.prio], j.tag)
		if j.id != 0 {
			r.left--
			pl := r.out[j.id]
			pl.Wait = f.at
			r.out[j.id] = pl
		}
		f.at += j.dur
		heap.Push(&h, f)
	}
	// Jobs the horizon cut off.
	for i, j := range r.jobs {
		if j.id == 0 || r.taken[i] {
			continue
		}
		if pl := r.out[j.id]; !pl.NoRunner {
			pl.Wait = Horizon
			r.out[j.id] = pl
		}
	}
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

// ixHeap is a heap of job indices under less.
type ixHeap struct {
	ix   []int
	less func(a, b int) bool
}

func (h ixHeap) Len() int           { return len(h.ix) }
func (h ixHeap) Less(i, j int) bool { return h.less(h.ix[i], h.ix[j]) }
func (h ixHeap) Swap(i, j int)      { h.ix[i], h.ix[j] = h.ix[j], h.ix[i] }
func (h *ixHeap) Push(x any)        { h.ix = append(h.ix, x.(int)) }
func (h *ixHeap) Pop() any {
	x := h.ix[len(h.ix)-1]
	h.ix = h.ix[:len(h.ix)-1]
	return x
}
