package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// aggregate turns per-request records into vLLM's result keys, following
// calculate_metrics in vllm/benchmarks/serve.py:
//   - only successful requests enter the latency statistics and token totals;
//   - TPOT per request is (latency − ttft)/(output_tokens − 1), defined only
//     when more than one token came back (0 in goodput checks otherwise);
//   - ITL pools every gap of every request;
//   - mean, median, std (population) and percentiles (numpy's linear rule)
//     are in ms; an empty series gives 0, as numpy does for `x or 0`.
//
// The per-request arrays (input_lens, output_lens, ttfts, itls, errors) keep
// one entry per request in send order, failed ones included.
func aggregate(recs []record, dur time.Duration, pcts []float64, goodput map[string]float64) *result.Result {
	r := &result.Result{
		Metrics:    map[string]float64{},
		InputLens:  make([]int, len(recs)),
		OutputLens: make([]int, len(recs)),
		TTFTs:      make([]float64, len(recs)),
		ITLs:       make([][]float64, len(recs)),
		Errors:     make([]string, len(recs)),
	}
	sec := &result.Section{
		E2ELs:       make([]float64, len(recs)),
		TPOTs:       make([]float64, len(recs)),
		ErrorCounts: map[string]int{},
	}
	r.Perfgate = sec

	var ttfts, tpots, allTPOTs, itls, e2els []float64
	for i := range recs {
		rec := &recs[i]
		r.InputLens[i] = rec.promptLen
		r.TTFTs[i] = rec.ttft
		r.ITLs[i] = rec.itl
		if r.ITLs[i] == nil {
			r.ITLs[i] = []float64{}
		}
		r.Errors[i] = rec.err
		if !rec.ok {
			r.Failed++
			sec.ErrorCounts[rec.errorRow()]++
			continue
		}
		out, _ := rec.outputTokens()
		r.OutputLens[i] = out
		r.Completed++
		r.TotalInputTokens += rec.promptLen
		r.TotalOutputTokens += out
		tpot := 0.0
		if out > 1 {
			tpot = (rec.latency - rec.ttft) / float64(out-1)
			tpots = append(tpots, tpot)
		}
		allTPOTs = append(allTPOTs, tpot)
		itls = append(itls, rec.itl...)
		ttfts = append(ttfts, rec.ttft)
		e2els = append(e2els, rec.latency)
		sec.E2ELs[i] = rec.latency * 1000
		sec.TPOTs[i] = tpot * 1000
	}
	if len(sec.ErrorCounts) == 0 {
		sec.ErrorCounts = nil
	}
	if len(recs) > 0 {
		sec.ErrorRate = float64(r.Failed) / float64(len(recs))
	}
	d := dur.Seconds()
	r.Duration = d
	if d > 0 {
		r.RequestThroughput = float64(r.Completed) / d
		r.OutputThroughput = float64(r.TotalOutputTokens) / d
		r.TotalTokenThroughput = float64(r.TotalInputTokens+r.TotalOutputTokens) / d
	}
	if len(goodput) > 0 {
		good := countGood(ttfts, allTPOTs, e2els, goodput)
		g := 0.0
		if d > 0 {
			g = float64(good) / d
		}
		r.RequestGoodput = &g
	}

	for _, m := range []struct {
		name   string
		values []float64
	}{{"ttft", ttfts}, {"tpot", tpots}, {"itl", itls}, {"e2el", e2els}} {
		addStats(r.Metrics, m.name, m.values, pcts)
	}
	r.MaxOutputTokensPerS, r.MaxConcurrentReqs = peaks(recs)
	return r
}

// countGood counts requests within every configured SLO (ms), as vLLM does:
// a request is good when each of its metrics is at or below its SLO.
func countGood(ttfts, tpots, e2els []float64, slo map[string]float64) int {
	good := 0
	for i := range ttfts {
		ok := true
		if v, set := slo["ttft"]; set && ttfts[i] > v/1000 {
			ok = false
		}
		if v, set := slo["tpot"]; set && tpots[i] > v/1000 {
			ok = false
		}
		if v, set := slo["e2el"]; set && e2els[i] > v/1000 {
			ok = false
		}
		if ok {
			good++
		}
	}
	return good
}

// addStats writes mean/median/std/pNN for one series (seconds in, ms out).
func addStats(m map[string]float64, name string, values []float64, pcts []float64) {
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	m["mean_"+name+"_ms"] = mean(sorted) * 1000
	m["median_"+name+"_ms"] = percentile(sorted, 50) * 1000
	m["std_"+name+"_ms"] = std(sorted) * 1000
	for _, p := range pcts {
		m["p"+percentileWord(p)+"_"+name+"_ms"] = percentile(sorted, p) * 1000
	}
}

// percentileWord prints 99 as "99" and 99.9 as "99.9", vLLM's key spelling.
func percentileWord(p float64) string {
	if p == math.Trunc(p) {
		return strconv.Itoa(int(p))
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// std is numpy's default (population, ddof=0) standard deviation.
func std(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	mu := mean(x)
	s := 0.0
	for _, v := range x {
		s += (v - mu) * (v - mu)
	}
	return math.Sqrt(s / float64(len(x)))
}

// percentile is numpy.percentile's default "linear" method over sorted x.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := (float64(n) - 1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return sorted[n-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

// peaks computes vLLM's max_output_tokens_per_s (content chunks landing in
// each one-second bucket from the first successful send) and
// max_concurrent_requests (a sweep over the successful requests'
// half-open [start, start+latency) intervals).
func peaks(recs []record) (tokensPerS, concurrent float64) {
	var t0 time.Time
	var tEnd float64
	found := false
	for i := range recs {
		if !recs[i].ok {
			continue
		}
		if !found || recs[i].start.Before(t0) {
			t0 = recs[i].start
		}
		found = true
	}
	if !found {
		return 0, 0
	}
	type event struct {
		t     float64
		delta int
	}
	events := make([]event, 0, 2*len(recs))
	for i := range recs {
		if !recs[i].ok {
			continue
		}
		s := recs[i].start.Sub(t0).Seconds()
		e := s + recs[i].latency
		tEnd = math.Max(tEnd, e)
		events = append(events, event{s, 1}, event{e, -1})
	}
	buckets := make([]float64, int(math.Ceil(tEnd))+1)
	for i := range recs {
		rec := &recs[i]
		if !rec.ok {
			continue
		}
		t := rec.start.Sub(t0).Seconds() + rec.ttft
		add := func(t float64) {
			if b := int(t); b >= 0 && b < len(buckets) {
				buckets[b]++
			}
		}
		add(t)
		for _, g := range rec.itl {
			t += g
			add(t)
		}
	}
	for _, b := range buckets {
		tokensPerS = math.Max(tokensPerS, b)
	}
	// Departures sort before arrivals at the same instant: half-open intervals.
	sort.Slice(events, func(a, b int) bool {
		if events[a].t != events[b].t {
			return events[a].t < events[b].t
		}
		return events[a].delta < events[b].delta
	})
	cur, peak := 0, 0
	for _, e := range events {
		cur += e.delta
		peak = max(peak, cur)
	}
	return tokensPerS, float64(peak)
}

// addVLLMArrays writes the per-request keys of vllm/benchmarks/serve.py's
// result that perfgate's result type does not hold, in send order, failed
// requests included:
//   - start_times: when each request was sent, in Unix seconds (vLLM
//     writes its process's perf_counter; only differences between them
//     mean anything in either);
//   - latencies: each request's end-to-end latency in s (0 when it failed);
//   - queue_times: how long each request waited in the client between
//     being due (its arrival time, and a free concurrency slot) and
//     reaching the socket, in s;
//   - generated_texts: each request's text when texts were kept, else "";
//   - rtfx: the real-time factor of audio benchmarks, 0 for text;
//   - label: null when none was given.
func addVLLMArrays(r *result.Result, recs []record, texts bool) error {
	starts := make([]float64, len(recs))
	lat := make([]float64, len(recs))
	queue := make([]float64, len(recs))
	gen := make([]string, len(recs))
	for i := range recs {
		rec := &recs[i]
		if !rec.start.IsZero() {
			starts[i] = float64(rec.start.UnixNano()) / 1e9
		}
		if rec.ok {
			lat[i] = rec.latency
		}
		left := rec.sent
		if left.IsZero() {
			left = rec.start
		}
		if !rec.due.IsZero() && !left.IsZero() {
			queue[i] = max(0, left.Sub(rec.due).Seconds())
		}
		if texts {
			gen[i] = unquote(rec.text)
		}
	}
	if r.Extra == nil {
		r.Extra = map[string]json.RawMessage{}
	}
	for k, v := range map[string]any{"start_times": starts, "latencies": lat, "queue_times": queue, "rtfx": 0.0, "label": nil} {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", k, err)
		}
		r.Extra[k] = b
	}
	r.GeneratedTexts = gen
	return nil
}
