package sim

import (
	"time"
)

// maxLag is how far behind its schedule the step loop may run and still
// shorten the next step to catch up: enough to absorb timer overshoot and
// loop overhead, too little to distort a step.
const maxLag = time.Millisecond

// scheduler owns the running batch, the waiting queue and the KV cache; it
// runs on one goroutine, so none of its state is locked.
type scheduler struct {
	e       *Engine
	cfg     Config
	kv      *kvCache
	model   *stepModel
	running []*seq
	waiting seqQueue
	credit  float64 // prefill eagerness accumulator
	stepNo  int64
	plan    []planned
	tally   stepTally
}

// planned is one sequence's share of a step: n tokens to compute.
type planned struct {
	s       *seq
	n       int
	prefill bool
}

// stepTally counts what the metrics and the profile record of one step.
type stepTally struct {
	work          stepWork
	prefillSeqs   int
	cachedTokens  int // prefix-cache hits of the sequences admitted
	queriedTokens int
	preemptions   int
}

func newScheduler(e *Engine) *scheduler {
	return &scheduler{
		e:     e,
		cfg:   e.cfg,
		kv:    newKVCache(e.cfg.NumGPUBlocks, e.cfg.BlockSize, e.cfg.PrefixCaching),
		model: newStepModel(e.cfg),
	}
}

// run is the engine loop: plan a step, wait out its time, then give every
// sequence whose tokens are all computed its next token. Step deadlines
// advance from the previous deadline, not from "now", so sleep overshoot
// does not accumulate while the engine is busy.
func (sc *scheduler) run() {
	e := sc.e
	defer close(e.schedEnd)
	var (
		next  time.Time
		busy  bool
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()

	for {
		sc.waiting.items = e.takeArrivals(sc.waiting.items)
		now := time.Now()
		sc.dropCancelled()
		sc.schedule(now)

		if len(sc.plan) == 0 {
			if sc.tally.preemptions > 0 {
				continue // the only runnable sequence preempted itself; admit next round
			}
			// Nothing can make progress: block until a request arrives, a
			// stall ends or Close, instead of spinning.
			busy = false
			e.stats.idle(sc.running, sc.waiting.len(), sc.kv.usage())
			idleFrom := now
			var stallEnd <-chan time.Time
			if at := sc.nextStallEnd(); !at.IsZero() {
				timer.Reset(time.Until(at))
				stallEnd = timer.C
			}
			select {
			case <-e.wake:
			case <-stallEnd:
			case <-e.done:
				return
			}
			timer.Stop()
			e.prof.idle(idleFrom, time.Now())
			continue
		}

		switch {
		case !busy:
			next = now
		case now.Sub(next) > maxLag:
			// Descheduled: restart the clock rather than shortening the
			// next steps to catch up, which would hand a new request its
			// first token before its prefill time.
			next = now.Add(-maxLag)
		}
		busy = true
		start := next
		d := sc.model.duration(sc.tally.work, start.Sub(e.start))
		next = next.Add(d)
		end := now // a zero-time step ends when it starts: no clock reads on the hot path
		if d > 0 {
			if wait := time.Until(next); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-e.done:
					return
				}
			}
			end = time.Now()
		}
		select {
		case <-e.done:
			return
		default:
		}
		sc.stepNo++
		sc.apply(end, start, d)
	}
}

// schedule plans one step into sc.plan: running sequences first, in
// admission order, then waiting ones, as vLLM's v1 scheduler does.
func (sc *scheduler) schedule(now time.Time) {
	sc.plan = sc.plan[:0]
	sc.tally = stepTally{}
	budget := sc.cfg.MaxNumBatchedTokens

	decoding, prefillPending := false, sc.waiting.len() > 0
	for _, s := range sc.running {
		if now.Before(s.stallUntil) {
			continue
		}
		if s.prefilling {
			prefillPending = true
		} else {
			decoding = true
		}
	}
	allowPrefill := true
	if decoding && prefillPending && sc.cfg.PrefillEagerness < 1 {
		sc.credit += sc.cfg.PrefillEagerness
		if sc.credit >= 1 {
			sc.credit--
		} else {
			allowPrefill = false
		}
	}

	for i := 0; i < len(sc.running) && budget > 0; i++ {
		s := sc.running[i]
		if now.Before(s.stallUntil) || (s.prefilling && !allowPrefill) {
			continue
		}
		n := 1
		if s.prefilling {
			n = min(s.numTokens()-s.computed, budget)
		}
		need := sc.kv.blocksFor(s.computed+n) - len(s.blocks)
		self := false
		for need > sc.kv.numFree {
			// Out of blocks: preempt the youngest running sequence, which
			// is s itself when s is the youngest.
			v := sc.running[len(sc.running)-1]
			sc.preempt(v)
			if v == s {
				self = true
				break
			}
		}
		if self {
			break
		}
		s.blocks, _ = sc.kv.allocate(s.blocks, need)
		sc.add(s, n, s.prefilling)
		budget -= n
	}
	if sc.tally.preemptions > 0 || !allowPrefill {
		return
	}

	bs := sc.cfg.BlockSize
	for sc.waiting.len() > 0 && budget > 0 && len(sc.running) < sc.cfg.MaxNumSeqs {
		s := sc.waiting.front()
		if s.cancelled.Load() {
			sc.waiting.popFront()
			sc.e.stats.aborted()
			continue
		}
		total := s.numTokens()
		hits, hitsFree := 0, 0
		if sc.kv.caching {
			// The last token is always computed: its logits give the next.
			hashes := s.hashes[:min(len(s.hashes), (total-1)/bs)]
			hits, hitsFree = sc.kv.lookup(hashes)
		}
		cached := hits * bs
		n := min(total-cached, budget)
		need := sc.kv.blocksFor(cached+n) - hits
		if need > sc.kv.numFree-hitsFree {
			break // first come, first served: later requests wait too
		}
		sc.waiting.popFront()
		s.blocks = sc.kv.take(s.blocks[:0], s.hashes[:hits])
		s.blocks, _ = sc.kv.allocate(s.blocks, need)
		s.computed, s.committed, s.prefilling = cached, hits, true
		if !s.admitted {
			s.admitted, s.scheduledAt, s.cachedTokens = true, now, cached
		}
		sc.tally.queriedTokens += total
		sc.tally.cachedTokens += cached
		sc.tally.work.prefillStarts++
		sc.running = append(sc.running, s)
		sc.add(s, n, true)
		budget -= n
	}
}

func (sc *scheduler) add(s *seq, n int, prefill bool) {
	sc.plan = append(sc.plan, planned{s: s, n: n, prefill: prefill})
	sc.tally.work.seqs++
	if prefill {
		sc.tally.work.prefillTokens += n
		sc.tally.prefillSeqs++
	} else {
		sc.tally.work.decodeSeqs++
	}
}

// preempt takes the last running sequence out of the batch, frees its
// blocks and puts it at the head of the queue to recompute, as vLLM's
// recompute preemption does. Its streamed tokens stand.
func (sc *scheduler) preempt(v *seq) {
	sc.running = sc.running[:len(sc.running)-1]
	sc.kv.release(v.blocks)
	v.blocks = v.blocks[:0]
	v.computed, v.committed, v.prefilling = 0, 0, true
	v.preemptions++
	sc.waiting.pushFront(v)
	sc.tally.preemptions++
}

// apply ends a step: computed tokens count, full blocks go to the prefix
// cache, and every sequence whose tokens are all computed gets a token.
func (sc *scheduler) apply(now, start time.Time, d time.Duration) {
	stats := sc.e.stats
	stats.mu.Lock()
	stats.beginStep(sc.tally)
	stall := time.Duration(sc.cfg.StallMS) * time.Millisecond
	finished := 0
	for _, p := range sc.plan {
		s := p.s
		if s.cancelled.Load() {
			continue // dropped next round
		}
		s.computed += p.n
		for s.committed < len(s.hashes) && (s.committed+1)*sc.cfg.BlockSize <= s.computed {
			sc.kv.commit(s.blocks[s.committed], s.hashes[s.committed])
			s.committed++
		}
		if s.computed < s.numTokens() {
			continue // more prompt chunks to go
		}
		s.prefilling = false
		s.gen++
		s.generated()
		stats.token(s, now)
		if s.gen == 1 {
			s.firstStep = sc.stepNo
			s.firstTokenAt = now
		}
		s.lastTokenAt = now
		done := s.gen >= s.maxTokens
		if done {
			s.lastStep = sc.stepNo
			if s.stopped {
				s.finishReason = finishStop
			}
			sc.kv.release(s.blocks)
			s.blocks = nil
			stats.finished(s, now)
			finished++
		}
		s.produced.Store(int64(s.gen))
		select {
		case s.notify <- struct{}{}:
		default:
		}
		if !done && stall > 0 && s.gen == s.stallAt {
			s.stallUntil = now.Add(stall)
		}
	}
	if finished > 0 {
		keep := sc.running[:0]
		for _, s := range sc.running {
			if s.gen < s.maxTokens {
				keep = append(keep, s)
			}
		}
		clear(sc.running[len(keep):])
		sc.running = keep
	}
	stats.endStep(len(sc.running), sc.waiting.len(), sc.kv.usage(), sc.model, start.Sub(sc.e.start))
	stats.mu.Unlock()
	sc.e.prof.step(start, d, sc.tally, len(sc.running), sc.waiting.len(), sc.kv.usage())
}

// dropCancelled frees the blocks of sequences whose client went away.
func (sc *scheduler) dropCancelled() {
	keep := sc.running[:0]
	for _, s := range sc.running {
		if s.cancelled.Load() {
			sc.kv.release(s.blocks)
			s.blocks = nil
			sc.e.stats.aborted()
			continue
		}
		keep = append(keep, s)
	}
	clear(sc.running[len(keep):])
	sc.running = keep
}

// nextStallEnd is the earliest time a stalled sequence resumes, or zero.
func (sc *scheduler) nextStallEnd() time.Time {
	var at time.Time
	now := time.Now()
	for _, s := range sc.running {
		if now.Before(s.stallUntil) && (at.IsZero() || s.stallUntil.Before(at)) {
			at = s.stallUntil
		}
	}
	return at
}

// seqQueue is a FIFO that also takes preempted sequences at its head.
type seqQueue struct {
	items []*seq
	head  int
}

func (q *seqQueue) len() int    { return len(q.items) - q.head }
func (q *seqQueue) front() *seq { return q.items[q.head] }

func (q *seqQueue) popFront() {
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head >= 1024 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}

func (q *seqQueue) pushFront(s *seq) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = s
		return
	}
	q.items = append(q.items, nil)
	copy(q.items[1:], q.items)
	q.items[0] = s
}
