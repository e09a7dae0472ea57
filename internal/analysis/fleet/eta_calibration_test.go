package fleet

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// A simulated day of a shared fleet, on its own clock (no wall time): 16
// runners (12 with gpu only, 4 with gpu and a100), 12 repositories of
// unequal activity, quick screens and merge work heavier in working
// hours, a nightly matrix of 80 jobs at 02:00, and 14 bisects of 6 jobs
// each. Claims follow the store's order (merge, aged, class, fair-share
// tag, sequence); tags are start-time fair queuing on the mean of a
// tier's last 20 run times, charged what the job really took at its end.
// Run times are log-normal (coefficient of variation 0.5). Each job's
// first ETA is taken when it is queued, from what the server would know
// then: the queue in claim order, the runners and what their jobs have
// run, the last 1,000 finished attempts and the last hour's arrivals.

type simJob struct {
	id        int64
	tenant    string
	tier      string
	kind      string
	labels    []string
	prio      int
	tag, cost float64
	seq       int64
	ageAt     time.Duration // 0: never
	arrive    time.Duration
	took      time.Duration // what it will take
	started   time.Duration
	runner    int
	eta       time.Duration // first ETA
	lo, hi    time.Duration
}

type simRunner struct {
	labels []string
	job    *simJob
	ends   time.Duration
}

// A estimator answers the first ETA (and range) of the jobs just queued.
type estimator func(s *daySim, now time.Duration) map[int64]Place

type daySim struct {
	rng      *rand.Rand
	now      time.Duration
	runners  []simRunner
	queue    []*simJob
	done     []Sample // newest last
	arrivals []*simJob
	all      []*simJob
	finish   map[string]float64 // class, tenant → finish
	weights  map[string]float64
	nextID   int64
}

func lognormal(rng *rand.Rand, mean time.Duration, cv float64) time.Duration {
	s2 := math.Log(1 + cv*cv)
	mu := math.Log(float64(mean)) - s2/2
	return time.Duration(math.Exp(mu + math.Sqrt(s2)*rng.NormFloat64()))
}

func newDaySim(seed uint64) *daySim {
	s := &daySim{rng: rand.New(rand.NewPCG(seed, 23)), finish: map[string]float64{}, weights: map[string]float64{"acme/r0": 2}}
	for i := range 16 {
		l := []string{"gpu"}
		if i >= 12 {
			l = append(l, "a100")
		}
		s.runners = append(s.runners, simRunner{labels: l})
	}
	tenants := make([]string, 12)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("acme/r%d", i)
	}
	// Zipf-like activity: r0 busiest.
	pick := func() string {
		var total float64
		for i := range tenants {
			total += 1 / float64(i+1)
		}
		x := s.rng.Float64() * total
		for i, t := range tenants {
			x -= 1 / float64(i+1)
			if x <= 0 {
				return t
			}
		}
		return tenants[len(tenants)-1]
	}
	labels := func() []string {
		if s.rng.Float64() < 0.2 {
			return []string{"gpu", "a100"}
		}
		return []string{"gpu"}
	}
	poisson := func(perHour func(h int) float64, tier, kind string) {
		t := time.Duration(0)
		for {
			h := int(t / time.Hour)
			if h >= 24 {
				return
			}
			// Thinning against the day's peak rate.
			t += time.Duration(s.rng.ExpFloat64() / 60 * float64(time.Hour))
			if t >= 24*time.Hour {
				return
			}
			if s.rng.Float64() < perHour(int(t/time.Hour))/60 {
				s.add(t, pick(), tier, kind, labels())
			}
		}
	}
	work := func(peak, off float64) func(int) float64 {
		return func(h int) float64 {
			if h >= 9 && h < 18 {
				return peak
			}
			return off
		}
	}
	poisson(work(55, 8), "quick", "pull_request")
	poisson(work(8, 1), "merge", "merge_group")
	for i := range 80 {
		s.add(2*time.Hour, tenants[i%8], "nightly", "nightly", labels())
	}
	for range 14 {
		at := 8*time.Hour + time.Duration(s.rng.Float64()*float64(12*time.Hour))
		who, l := pick(), labels()
		for range 6 {
			s.add(at, who, "quick", "bisect", l)
		}
	}
	sort.SliceStable(s.arrivals, func(i, j int) bool { return s.arrivals[i].arrive < s.arrivals[j].arrive })
	// Yesterday's attempts: the server has a history to learn from.
	for range 50 {
		for _, tier := range []string{"nightly", "merge", "quick"} {
			for _, pool := range []string{"gpu", "a100,gpu"} {
				s.done = append(s.done, Sample{Tier: tier, Pool: pool, Took: lognormal(s.rng, simMeans[tier], 0.5)})
			}
		}
	}
	return s
}

var simMeans = map[string]time.Duration{"quick": 10 * time.Minute, "merge": 25 * time.Minute, "nightly": 40 * time.Minute}

func (s *daySim) add(at time.Duration, tenant, tier, kind string, labels []string) {
	s.nextID++
	j := &simJob{id: s.nextID, tenant: tenant, tier: tier, kind: kind, labels: labels, prio: Priority(tier, kind),
		arrive: at, took: lognormal(s.rng, simMeans[tier], 0.5), runner: -1}
	s.arrivals = append(s.arrivals, j)
}

// expected is the store's charge: the mean of the tier's last 20 run
// times, else its default.
func (s *daySim) expected(tier string) time.Duration {
	var sum time.Duration
	n := 0
	for i := len(s.done) - 1; i >= 0 && n < RecentWindow; i-- {
		if s.done[i].Tier == tier {
			sum += s.done[i].Took
			n++
		}
	}
	if n == 0 {
		return DefaultDuration(tier)
	}
	return sum / time.Duration(n)
}

func fkey(prio int, tenant string) string { return fmt.Sprint(prio, "/", tenant) }

// enqueue places a job as the store does.
func (s *daySim) enqueue(j *simJob) {
	w := s.weights[j.tenant]
	if w == 0 {
		w = 1
	}
	j.cost = s.expected(j.tier).Seconds() / w
	v, have := 0.0, false
	for _, r := range s.runners {
		if r.job != nil && r.job.prio == j.prio && (!have || r.job.tag > v) {
			v, have = r.job.tag, true
		}
	}
	if !have {
		for _, q := range s.queue {
			if q.prio == j.prio && (!have || q.tag < v) {
				v, have = q.tag, true
			}
		}
	}
	if !have {
		for k, f := range s.finish {
			if strings.HasPrefix(k, fmt.Sprint(j.prio, "/")) && f > v {
				v = f
			}
		}
	}
	k := fkey(j.prio, j.tenant)
	j.tag = max(v, s.finish[k])
	s.finish[k] = j.tag + j.cost
	j.seq = j.id
	if a := AgeAfter(j.prio); a > 0 {
		j.ageAt = s.now + a
	}
	s.queue = append(s.queue, j)
	s.all = append(s.all, j)
}

// claimOrder sorts the queue as the store's claimOrder does at now.
func (s *daySim) claimOrder() {
	key := func(j *simJob) (int, time.Duration, int, float64, int64) {
		switch {
		case j.prio == PriorityMerge:
			return 0, 0, 0, j.tag, j.seq
		case j.ageAt > 0 && j.ageAt <= s.now:
			return 1, j.ageAt, 0, 0, j.seq
		}
		return 2, 0, j.prio, j.tag, j.seq
	}
	slices.SortStableFunc(s.queue, func(a, b *simJob) int {
		r1, a1, p1, t1, q1 := key(a)
		r2, a2, p2, t2, q2 := key(b)
		switch {
		case r1 != r2:
			return r1 - r2
		case a1 != a2:
			return int((a1 - a2) / (a1 - a2).Abs())
		case p1 != p2:
			return p1 - p2
		case t1 != t2:
			if t1 < t2 {
				return -1
			}
			return 1
		case q1 != q2:
			return int(q1 - q2)
		}
		return 0
	})
}

func (s *daySim) canRun(r simRunner, j *simJob) bool {
	for _, l := range j.labels {
		if !slices.Contains(r.labels, l) {
			return false
		}
	}
	return true
}

// claim has idle runners take the first job in claim order each can run.
func (s *daySim) claim() {
	s.claimOrder()
	for i := range s.runners {
		r := &s.runners[i]
		if r.job != nil {
			continue
		}
		for qi, j := range s.queue {
			if s.canRun(*r, j) {
				r.job, r.ends = j, s.now+j.took
				j.started, j.runner = s.now, i
				s.queue = slices.Delete(s.queue, qi, qi+1)
				break
			}
		}
	}
}

// end finishes the runners' jobs due by now and charges their tenants.
func (s *daySim) end() {
	for i := range s.runners {
		r := &s.runners[i]
		if r.job == nil || r.ends > s.now {
			continue
		}
		j := r.job
		w := s.weights[j.tenant]
		if w == 0 {
			w = 1
		}
		s.finish[fkey(j.prio, j.tenant)] += j.took.Seconds()/w - j.cost
		s.done = append(s.done, Sample{Tier: j.tier, Pool: Pool(j.labels, ""), Took: j.took})
		r.job = nil
	}
}

func (s *daySim) nextEnd() time.Duration {
	next := time.Duration(math.MaxInt64)
	for _, r := range s.runners {
		if r.job != nil && r.ends < next {
			next = r.ends
		}
	}
	return next
}

// run plays the day; est gives the first ETA of each job when queued.
func (s *daySim) run(est estimator) {
	ai := 0
	for ai < len(s.arrivals) || len(s.queue) > 0 {
		next := s.nextEnd()
		if ai < len(s.arrivals) && s.arrivals[ai].arrive <= next {
			next = s.arrivals[ai].arrive
		}
		s.now = next
		s.end()
		var fresh []*simJob
		for ai < len(s.arrivals) && s.arrivals[ai].arrive <= s.now {
			j := s.arrivals[ai]
			s.enqueue(j)
			fresh = append(fresh, j)
			ai++
		}
		if len(fresh) > 0 {
			s.claimOrder()
			places := est(s, s.now)
			for _, j := range fresh {
				p := places[j.id]
				j.eta, j.lo, j.hi = p.Wait, p.Low, p.High
			}
		}
		s.claim()
	}
}

// samples are the last 1,000 finished attempts, newest first.
func (s *daySim) samples() []Sample {
	var out []Sample
	for i := len(s.done) - 1; i >= 0 && len(out) < 1000; i-- {
		out = append(out, s.done[i])
	}
	return out
}

func (s *daySim) queued(now time.Duration) []Queued {
	var out []Queued
	for _, j := range s.queue {
		q := Queued{ID: j.id, Tier: j.tier, Labels: j.labels, Priority: j.prio, Tenant: j.tenant, Tag: j.tag, Cost: j.cost}
		if j.ageAt > 0 {
			q.Ages, q.AgesIn = true, j.ageAt-now
		}
		out = append(out, q)
	}
	return out
}

// streams are the arrivals as the store counts them (Arrived).
func (s *daySim) streams(now time.Duration) []Stream {
	type key struct {
		prio               int
		tenant, tier, pool string
	}
	counts := map[key]*Arrived{}
	var keys []key
	for _, j := range s.all {
		if j.arrive < now-MixWindow || j.arrive > now {
			continue
		}
		k := key{j.prio, j.tenant, j.tier, Pool(j.labels, "")}
		c := counts[k]
		if c == nil {
			c = &Arrived{Priority: k.prio, Tenant: k.tenant, Tier: k.tier, Pool: k.pool}
			counts[k] = c
			keys = append(keys, k)
		}
		c.Count++
		if j.arrive >= now-ArrivalWindow {
			c.Recent++
		}
		c.Cost += j.cost
	}
	var out []Arrived
	for _, k := range keys {
		c := *counts[k]
		c.Cost /= float64(c.Count)
		out = append(out, c)
	}
	return Streams(out)
}

// newEstimator is Estimate fed as the queue note feeds it.
func newEstimator(s *daySim, now time.Duration) map[int64]Place {
	d := NewDurations(s.samples())
	var runners []Runner
	for _, r := range s.runners {
		run := Runner{Labels: r.labels, Available: true}
		if r.job != nil {
			run.Job = &RunningJob{Tier: r.job.tier, Pool: Pool(r.job.labels, ""), Ran: now - r.job.started, Priority: r.job.prio, Tag: r.job.tag}
		}
		runners = append(runners, run)
	}
	return Estimate(Forecast{Queue: s.queued(now), Runners: runners, Durations: d, Arrivals: s.streams(now)})
}

// oldEstimator is the estimator before issue 23.
func oldEstimator(s *daySim, now time.Duration) map[int64]Place {
	d := newOldDurations(s.samples())
	var runners []Runner
	for _, r := range s.runners {
		run := Runner{Labels: r.labels, Available: true}
		if r.job != nil {
			run.BusyFor = max(d.Of(r.job.tier, Pool(r.job.labels, ""))-(now-r.job.started), 0)
		}
		runners = append(runners, run)
	}
	out := map[int64]Place{}
	for id, w := range oldEstimate(s.queued(now), runners, d.Of) {
		out[id] = Place{Wait: w, Low: w, High: w}
	}
	return out
}

// calibration is how first ETAs compared with the waits.
type calibration struct {
	jobs, waited      int
	median            float64 // of ETA ÷ wait over the jobs that waited
	over2             float64 // share of those that waited more than twice the ETA
	inRange           float64 // share of those whose wait fell in the range
	classOver2        map[string]float64
	classN            map[string]int
	meanWait, maxWait time.Duration
}

func calibrate(seed uint64, est estimator, resolution time.Duration) calibration {
	s := newDaySim(seed)
	s.run(est)
	c := calibration{jobs: len(s.all), classOver2: map[string]float64{}, classN: map[string]int{}}
	var ratios []float64
	var over, in int
	var total time.Duration
	for _, j := range s.all {
		wait := j.started - j.arrive
		if wait <= 0 {
			continue
		}
		// Compared at the note's resolution: "under a minute" is honoured
		// by a wait under a minute.
		eta, wait := max(j.eta, resolution), max(wait, resolution)
		c.waited++
		total += wait
		c.maxWait = max(c.maxWait, wait)
		ratios = append(ratios, float64(eta)/float64(wait))
		class := PriorityName(j.prio)
		c.classN[class]++
		if wait > 2*eta {
			over++
			c.classOver2[class]++
		}
		if wait >= j.lo && wait <= j.hi {
			in++
		}
	}
	if c.waited == 0 {
		return c
	}
	sort.Float64s(ratios)
	n := len(ratios)
	c.median = ratios[n/2]
	if n%2 == 0 {
		c.median = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	c.over2 = float64(over) / float64(n)
	c.inRange = float64(in) / float64(n)
	for k, v := range c.classOver2 {
		c.classOver2[k] = v / float64(c.classN[k])
	}
	c.meanWait = total / time.Duration(n)
	return c
}

func (c calibration) String() string {
	var classes []string
	for _, k := range []string{"merge", "quick", "nightly", "batch"} {
		classes = append(classes, fmt.Sprintf("%s %.0f%% of %d", k, 100*c.classOver2[k], c.classN[k]))
	}
	return fmt.Sprintf("%d jobs, %d waited (mean %v, max %v): median ETA/wait %.3f, waited > 2×ETA %.1f%% (%s), wait within the range %.0f%%",
		c.jobs, c.waited, c.meanWait.Round(time.Second), c.maxWait.Round(time.Second), c.median, 100*c.over2, strings.Join(classes, ", "), 100*c.inRange)
}

// etaDays is how many simulated days TestETACalibration plays (each its
// own seed): go test -run TestETACalibration -v ./internal/analysis/fleet/ -args -eta.days 6
var etaDays = flag.Int("eta.days", 3, "simulated days TestETACalibration plays")

// The calibration targets of issue 23: the median first ETA ÷ wait in
// 0.9–1.1 and at most 10% of the jobs waiting more than twice their ETA,
// on every seed; the old estimator misses them (so this test can fail).
func TestETACalibration(t *testing.T) {
	var seeds []uint64
	for d := range *etaDays {
		seeds = append(seeds, uint64(d)+1)
	}
	if testing.Short() {
		seeds = seeds[:min(len(seeds), 1)]
	}
	ok := func(c calibration) bool { return c.median >= 0.9 && c.median <= 1.1 && c.over2 <= 0.10 }
	for _, seed := range seeds {
		c := calibrate(seed, newEstimator, time.Minute)
		t.Logf("seed %d, new: %v", seed, c)
		if !ok(c) {
			t.Errorf("seed %d: %v; want median 0.9–1.1, ≤ 10%% over 2×", seed, c)
		}
		old := calibrate(seed, oldEstimator, time.Minute)
		t.Logf("seed %d, old: %v", seed, old)
		if ok(old) {
			t.Errorf("seed %d: the old estimator meets the targets too (%v): the test cannot tell them apart", seed, old)
		}
	}
}
