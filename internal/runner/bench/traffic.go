package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Traffic shapes (result.Traffic): multi-turn chat sessions, a prompt
// length mix and a model mix. Each choice has a random stream of its own
// under the run's seed, so adding a model mix does not change which
// prompt class a request drew, and the measured requests never depend on
// the warm-up's.
const (
	streamClass   = 0x5eed_c1a5
	streamModel   = 0x5eed_30de
	streamSession = 0x5eed_5e55
)

// checkTraffic validates the shape against the rest of the options.
func (o *Options) checkTraffic() error {
	t := o.Traffic
	if !t.Shaped() {
		return nil
	}
	if err := t.Check(); err != nil {
		return usageErr("traffic", "%v", err)
	}
	if isTrace(o.Dataset) {
		return usageErr("dataset", "a trace is its own traffic: it takes no sessions, prompt mix or model mix")
	}
	if (t.Sessions != nil || len(t.PromptMix) > 0) && o.Dataset != "random" {
		return usageErr("dataset", "sessions and a prompt mix write their own prompts: use --dataset random (a model mix works with any dataset)")
	}
	return nil
}

// shapedSamples writes the measured samples of a session or prompt-mix
// shape: session-major (a session's turns in order) for sessions.
func shapedSamples(ctx context.Context, o *Options, p promptTokens) ([]sample, error) {
	t := o.Traffic
	classRNG := rand.New(rand.NewPCG(uint64(o.Seed), streamClass))
	textRNG := rand.New(rand.NewPCG(uint64(o.Seed), streamSession))
	lengths := func() (in, out int, class string) {
		if len(t.PromptMix) == 0 {
			return o.InputLen, o.OutputLen, ""
		}
		c := t.PromptMix[weighted(classRNG, len(t.PromptMix), func(i int) float64 { return t.PromptMix[i].Weight })]
		out = o.OutputLen
		if c.OutputLen > 0 {
			out = c.OutputLen
		}
		return c.InputLen, out, c.Name
	}
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = p.vocab[textRNG.IntN(len(p.vocab))]
		}
		return strings.Join(ws, " ")
	}
	var out []sample
	if s := t.Sessions; s != nil {
		for range sessionCount(o) {
			// A session keeps its prompt class: a long-document chat stays one.
			in, outLen, class := lengths()
			first := text(in)
			msgs := []chatMessage{{Role: "user", Content: first}}
			prompt, n := first, in
			for turn := range s.Turns {
				if turn > 0 {
					answer, user := text(outLen), text(s.UserLen)
					msgs = append(msgs[:len(msgs):len(msgs)], chatMessage{Role: "assistant", Content: answer}, chatMessage{Role: "user", Content: user})
					prompt += " " + answer + " " + user
					n += outLen + s.UserLen
				}
				out = append(out, sample{prompt: prompt, promptLen: n, maxTokens: outLen, class: class, messages: msgs})
			}
		}
	} else {
		for range o.NumPrompts {
			in, outLen, class := lengths()
			out = append(out, sample{prompt: text(in), promptLen: in, maxTokens: outLen, class: class})
		}
	}
	if err := recount(ctx, out, p.tok); err != nil {
		return nil, fmt.Errorf("measure prompts with the server's tokenizer: %w", err)
	}
	return out, nil
}

// sessionCount is how many sessions a run plays.
func sessionCount(o *Options) int {
	s := o.Traffic.Sessions
	if s.Count > 0 {
		return s.Count
	}
	return max(1, o.NumPrompts/s.Turns)
}

// assignModels draws each sample's model from the mix; a session's turns
// all go to the model its first turn drew.
func assignModels(samples []sample, o *Options) {
	t := o.Traffic
	if t == nil || len(t.Models) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), streamModel))
	turns := 1
	if t.Sessions != nil {
		turns = t.Sessions.Turns
	}
	for i := range samples {
		if i%turns == 0 {
			samples[i].model = t.Models[weighted(rng, len(t.Models), func(k int) float64 { return t.Models[k].Weight })].Name
		} else {
			samples[i].model = samples[i-1].model
		}
	}
}

// weighted draws an index in [0, n) with probability weight(i)/Σweight.
func weighted(rng *rand.Rand, n int, weight func(int) float64) int {
	total := 0.0
	for i := range n {
		total += weight(i)
	}
	x := rng.Float64() * total
	for i := range n {
		if x -= weight(i); x < 0 {
			return i
		}
	}
	return n - 1
}

// trafficRecord is the shape as the result records it, with what was drawn.
func trafficRecord(o *Options, measured []sample) *result.Traffic {
	if !o.Traffic.Shaped() {
		return nil
	}
	t := *o.Traffic
	t.Counts = map[string]int{}
	for _, s := range measured {
		if s.class != "" {
			t.Counts["class:"+s.class]++
		}
		if s.model != "" {
			t.Counts["model:"+s.model]++
		}
	}
	if t.Sessions != nil {
		t.Counts["sessions"] = sessionCount(o)
	}
	return &t
}

// runSessions plays the sessions: each starts at its arrival offset (and
// when a concurrency slot is free: MaxConcurrency caps sessions in flight,
// and so requests), then sends its turns one after another, each after
// the previous answer and the think time. reqs is session-major, turns
// per session.
func runSessions(ctx context.Context, q *requester, reqs []request, turns int, starts []time.Duration, think time.Duration, conc int, done func()) ([]record, time.Duration) {
	recs := make([]record, len(reqs))
	var slots chan struct{}
	if conc > 0 {
		slots = make(chan struct{}, conc)
	}
	var wg sync.WaitGroup
	start := time.Now()
	sessions := (len(reqs) + turns - 1) / turns
dispatch:
	for s := range sessions {
		if !sleepCtx(ctx, time.Until(start.Add(starts[s]))) {
			break
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break dispatch
			}
		}
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := s * turns; i < min((s+1)*turns, len(reqs)); i++ {
				if i > s*turns && !sleepCtx(ctx, think) {
					break
				}
				recs[i].due = time.Now()
				q.do(ctx, reqs[i], &recs[i])
				if done != nil {
					done()
				}
			}
			if slots != nil {
				<-slots
			}
		}(s)
	}
	wg.Wait()
	return recs, time.Since(start)
}

// sleepCtx waits d (nothing when d ≤ 0); false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
