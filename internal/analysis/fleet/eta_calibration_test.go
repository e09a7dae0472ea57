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
	gpu       string // the card it is pinned to (a bisect step)
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
	cancelAt  time.Duration // 0: never; else when it is cancelled if still queued
	cancelled bool
	noRunner  bool    // its first note said no runner could take it
	then      *simJob // the bisect's next step, queued when this one ends
}

type simRunner struct {
	labels  []string
	gpu     string
	drained bool
	job     *simJob
	ends    time.Duration
}

// simDrain drains a runner from at until at+for (it finishes its job).
type simDrain struct {
	at, span time.Duration
	runner   int
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
	drains   []simDrain
	stress   bool // drains, bursts and cancellations
}

func lognormal(rng *rand.Rand, mean time.Duration, cv float64) time.Duration {
	s2 := math.Log(1 + cv*cv)
	mu := math.Log(float64(mean)) - s2/2
	return time.Duration(math.Exp(mu + math.Sqrt(s2)*rng.NormFloat64()))
}

func newDaySim(seed uint64, stress bool) *daySim {
	s := &daySim{rng: rand.New(rand.NewPCG(seed, 23)), finish: map[string]float64{}, weights: map[string]float64{"acme/r0": 2}, stress: stress}
	for i := range 16 {
		l := []string{"gpu"}
		if i >= 12 {
			l = append(l, "a100")
		}
		s.runners = append(s.runners, simRunner{labels: l, gpu: fmt.Sprintf("GPU-%02d", i)})
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
		if !s.stress {
			for range 6 {
				s.add(at, who, "quick", "bisect", l)
			}
			continue
		}
		// Stressed, a bisect's 6 steps run one after another, each
		// queued when the last ends, all pinned to the card the
		// regression was seen on.
		card := s.rng.IntN(12)
		if len(l) > 1 {
			card = 12 + s.rng.IntN(4)
		}
		var prev *simJob
		for k := range 6 {
			j := s.add(at, who, "quick", "bisect", l)
			j.gpu = s.runners[card].gpu
			if k > 0 {
				prev.then = j
				s.arrivals = s.arrivals[:len(s.arrivals)-1] // queued by its step, not at a time
			}
			prev = j
		}
	}
	if s.stress {
		// A 20-job nightly burst in working hours (a re-run matrix).
		at := 10*time.Hour + time.Duration(s.rng.Float64()*float64(6*time.Hour))
		who := pick()
		for range 20 {
			s.add(at, who, "nightly", "nightly", labels())
		}
		// Merge-queue bursts: 4 a day of 5 jobs.
		for range 4 {
			at := 9*time.Hour + time.Duration(s.rng.Float64()*float64(9*time.Hour))
			who := pick()
			for range 5 {
				s.add(at, who, "merge", "merge_group", []string{"gpu"})
			}
		}
		// Drains: 3 a day of 1–3 h, one of them an a100 runner, not
		// known ahead.
		for k := range 3 {
			r := s.rng.IntN(12)
			if k == 0 {
				r = 12 + s.rng.IntN(4)
			}
			s.drains = append(s.drains, simDrain{at: 8*time.Hour + time.Duration(s.rng.Float64()*float64(12*time.Hour)),
				span: time.Hour + time.Duration(s.rng.Float64()*float64(2*time.Hour)), runner: r})
		}
		// Cancellations: 15% of quick screens are superseded or closed
		// within about 10 minutes.
		for _, j := range s.arrivals {
			if j.kind == "pull_request" && s.rng.Float64() < 0.15 {
				j.cancelAt = j.arrive + time.Duration(s.rng.ExpFloat64()*float64(10*time.Minute))
			}
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

func (s *daySim) add(at time.Duration, tenant, tier, kind string, labels []string) *simJob {
	s.nextID++
	j := &simJob{id: s.nextID, tenant: tenant, tier: tier, kind: kind, labels: labels, prio: Priority(tier, kind),
		arrive: at, took: lognormal(s.rng, simMeans[tier], 0.5), runner: -1}
	s.arrivals = append(s.arrivals, j)
	return j
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
	if r.drained || j.gpu != "" && j.gpu != r.gpu {
		return false
	}
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

// end finishes the runners' jobs due by now and charges their tenants;
// it answers the bisect steps they queue.
func (s *daySim) end() (next []*simJob) {
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
		s.done = append(s.done, Sample{Tier: j.tier, Pool: Pool(j.labels, j.gpu), Took: j.took})
		r.job = nil
		if j.then != nil {
			j.then.arrive = s.now
			next = append(next, j.then)
		}
	}
	return next
}

// cancel drops the queued jobs cancelled by now, refunding their
// tenants as the store does (refund.go): the tenant's jobs behind move
// up by the cost, its finish back by it.
func (s *daySim) cancel() {
	s.queue = slices.DeleteFunc(s.queue, func(j *simJob) bool {
		if j.cancelAt == 0 || j.cancelAt > s.now {
			return false
		}
		j.cancelled = true
		for _, q := range s.queue {
			if q != j && q.prio == j.prio && q.tenant == j.tenant && q.tag > j.tag {
				q.tag -= j.cost
			}
		}
		s.finish[fkey(j.prio, j.tenant)] -= j.cost
		return true
	})
}

// drain sets each runner's drained flag as the plan has it at now.
func (s *daySim) drain() {
	for i := range s.runners {
		s.runners[i].drained = false
	}
	for _, d := range s.drains {
		if d.at <= s.now && s.now < d.at+d.span {
			s.runners[d.runner].drained = true
		}
	}
}

// nextChange is the next drain's start or end, or cancellation, after now.
func (s *daySim) nextChange() time.Duration {
	next := time.Duration(math.MaxInt64)
	for _, d := range s.drains {
		for _, t := range []time.Duration{d.at, d.at + d.span} {
			if t > s.now {
				next = min(next, t)
			}
		}
	}
	for _, j := range s.queue {
		if j.cancelAt > s.now {
			next = min(next, j.cancelAt)
		}
	}
	return next
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
	for ai < len(s.arrivals) || len(s.queue) > 0 || s.nextEnd() < math.MaxInt64 {
		next := min(s.nextEnd(), s.nextChange())
		if ai < len(s.arrivals) && s.arrivals[ai].arrive <= next {
			next = s.arrivals[ai].arrive
		}
		s.now = next
		fresh := s.end()
		for _, j := range fresh {
			s.enqueue(j)
		}
		s.cancel()
		s.drain()
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
				j.eta, j.lo, j.hi, j.noRunner = p.Wait, p.Low, p.High, p.NoRunner
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
		q := Queued{ID: j.id, Tier: j.tier, Labels: j.labels, GPUUUID: j.gpu, Priority: j.prio, Tenant: j.tenant, Tag: j.tag, Cost: j.cost}
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
		k := key{j.prio, j.tenant, j.tier, Pool(j.labels, j.gpu)}
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
	return Estimate(s.forecast(now))
}

// quartileEstimator is Estimate with issue 23's range: the replays'
// quartiles.
func quartileEstimator(s *daySim, now time.Duration) map[int64]Place {
	return estimate(s.forecast(now), 0.25, 0.75)
}

// forecast is what the queue note knows at now.
func (s *daySim) forecast(now time.Duration) Forecast {
	d := NewDurations(s.samples())
	var runners []Runner
	for _, r := range s.runners {
		run := Runner{Labels: r.labels, GPUUUIDs: []string{r.gpu}, Available: !r.drained}
		if r.job != nil {
			run.Job = &RunningJob{Tier: r.job.tier, Pool: Pool(r.job.labels, r.job.gpu), Ran: now - r.job.started, Priority: r.job.prio, Tag: r.job.tag}
		}
		runners = append(runners, run)
	}
	return Forecast{Queue: s.queued(now), Runners: runners, Durations: d, Arrivals: s.streams(now)}
}

// oldEstimator is the estimator before issue 23.
func oldEstimator(s *daySim, now time.Duration) map[int64]Place {
	d := newOldDurations(s.samples())
	var runners []Runner
	for _, r := range s.runners {
		run := Runner{Labels: r.labels, GPUUUIDs: []string{r.gpu}, Available: !r.drained}
		if r.job != nil {
			run.BusyFor = max(d.Of(r.job.tier, Pool(r.job.labels, r.job.gpu))-(now-r.job.started), 0)
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
	cancelled         int     // left the queue before a runner took them
	noEstimate        int     // waited with no runner to take them (a drained card): no figure shown
	median            float64 // of ETA ÷ wait over the jobs that waited
	over2             float64 // share of those that waited more than twice the ETA
	inRange           float64 // share of those whose wait fell in the range
	over2High         float64 // share of those that waited more than twice the range's upper end
	below, above      float64 // shares that waited less than the range's start, more than its end
	classOver2        map[string]float64
	classN            map[string]int
	classIn           map[string]float64 // share of a class's waits in the range
	meanWait, maxWait time.Duration
}

func calibrate(seed uint64, stress bool, est estimator, resolution time.Duration) calibration {
	s := newDaySim(seed, stress)
	s.run(est)
	c := calibration{jobs: len(s.all), classOver2: map[string]float64{}, classN: map[string]int{}, classIn: map[string]float64{}}
	var ratios []float64
	var over, in, overHi int
	var total time.Duration
	for _, j := range s.all {
		if j.cancelled {
			c.cancelled++
			continue
		}
		wait := j.started - j.arrive
		if wait <= 0 {
			continue
		}
		if j.noRunner {
			c.noEstimate++
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
		if wait >= j.lo && wait <= max(j.hi, resolution) {
			in++
			c.classIn[class]++
		}
		if wait < j.lo {
			c.below++
		}
		if wait > max(j.hi, resolution) {
			c.above++
		}
		if wait > 2*max(j.hi, resolution) {
			overHi++
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
	c.over2High = float64(overHi) / float64(n)
	c.below /= float64(n)
	c.above /= float64(n)
	for k, v := range c.classOver2 {
		c.classOver2[k] = v / float64(c.classN[k])
	}
	for k, v := range c.classIn {
		c.classIn[k] = v / float64(c.classN[k])
	}
	c.meanWait = total / time.Duration(n)
	return c
}

func (c calibration) String() string {
	var classes []string
	for _, k := range []string{"merge", "quick", "nightly", "batch"} {
		classes = append(classes, fmt.Sprintf("%s %.0f%% of %d, %.0f%% in range", k, 100*c.classOver2[k], c.classN[k], 100*c.classIn[k]))
	}
	return fmt.Sprintf("%d jobs (%d cancelled), %d waited (mean %v, max %v; %d more with no runner to estimate): median ETA/wait %.3f, waited > 2×ETA %.1f%% (%s), wait within the range %.1f%% (below %.1f%%, above %.1f%%), > 2× its upper end %.1f%%",
		c.jobs, c.cancelled, c.waited, c.meanWait.Round(time.Second), c.maxWait.Round(time.Second), c.noEstimate, c.median, 100*c.over2, strings.Join(classes, ", "), 100*c.inRange, 100*c.below, 100*c.above, 100*c.over2High)
}

// etaDays is how many simulated days TestETACalibration plays (each its
// own seed). The suite plays one; the published figures are six:
//
//	go test -run TestETACalibration -v ./internal/analysis/fleet/ -args -eta.days 6
var etaDays = flag.Int("eta.days", 1, "simulated days TestETACalibration plays")

// The calibration targets. Issue 23, on a calm day: the median first
// ETA ÷ wait in 0.9–1.1 and at most 10% of the jobs waiting more than
// twice their ETA; the estimator before it misses them. Issue 37, on a
// stressed day (runner drains, bisect steps pinned to their card, a
// nightly and merge-queue bursts, cancellations): the range shown holds
// the wait for at least 80% of the jobs and at most 5% wait more than
// twice its upper end; issue 23's quartile range misses that. Each
// check can fail: the estimator it replaced is run beside it.
func TestETACalibration(t *testing.T) {
	var seeds []uint64
	for d := range max(*etaDays, 1) {
		seeds = append(seeds, uint64(d)+1)
	}
	if testing.Short() {
		seeds = seeds[:1]
	}
	calm := func(c calibration) bool { return c.median >= 0.9 && c.median <= 1.1 && c.over2 <= 0.10 }
	holds := func(c calibration) bool { return c.inRange >= 0.80 && c.over2High <= 0.05 }
	for _, seed := range seeds {
		c := calibrate(seed, false, newEstimator, time.Minute)
		t.Logf("seed %d, calm, new: %v", seed, c)
		if !calm(c) || !holds(c) {
			t.Errorf("seed %d, calm: %v; want median 0.9–1.1, ≤ 10%% over 2×ETA, ≥ 80%% in the range, ≤ 5%% over 2× its end", seed, c)
		}
		old := calibrate(seed, false, oldEstimator, time.Minute)
		t.Logf("seed %d, calm, before issue 23: %v", seed, old)
		if calm(old) {
			t.Errorf("seed %d: the estimator before issue 23 meets the targets too (%v): the test cannot tell them apart", seed, old)
		}
		st := calibrate(seed, true, newEstimator, time.Minute)
		t.Logf("seed %d, stressed, new: %v", seed, st)
		if !holds(st) {
			t.Errorf("seed %d, stressed: %v; want ≥ 80%% in the range, ≤ 5%% over 2× its end", seed, st)
		}
		q := calibrate(seed, true, quartileEstimator, time.Minute)
		t.Logf("seed %d, stressed, issue 23's range: %v", seed, q)
		if holds(q) {
			t.Errorf("seed %d: issue 23's range holds too (%v): the test cannot tell them apart", seed, q)
		}
	}
}
