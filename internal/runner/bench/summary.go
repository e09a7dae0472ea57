package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// WriteSummary prints r as vLLM's serve benchmark prints its result table,
// followed by the distinct error messages and their counts when requests
// failed. It reads only the result, so it works on a vLLM file too.
func WriteSummary(w io.Writer, r *result.Result) {
	row := func(label string, v string) { fmt.Fprintf(w, "%-40s %s\n", label, v) }
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	title := func(s string, c byte) { fmt.Fprintln(w, center(s, 50, c)) }

	title(" Serving Benchmark Result ", '=')
	row("Successful requests:", strconv.Itoa(r.Completed))
	row("Failed requests:", strconv.Itoa(r.Failed))
	if r.MaxConcurrency != nil {
		row("Maximum request concurrency:", strconv.Itoa(*r.MaxConcurrency))
	}
	if r.RequestRate != 0 && !r.RequestRate.IsInf() {
		row("Request rate configured (RPS):", f2(float64(r.RequestRate)))
	}
	row("Benchmark duration (s):", f2(r.Duration))
	row("Total input tokens:", strconv.Itoa(r.TotalInputTokens))
	row("Total generated tokens:", strconv.Itoa(r.TotalOutputTokens))
	row("Request throughput (req/s):", f2(r.RequestThroughput))
	if r.RequestGoodput != nil {
		row("Request goodput (req/s):", f2(*r.RequestGoodput))
	}
	row("Output token throughput (tok/s):", f2(r.OutputThroughput))
	row("Peak output token throughput (tok/s):", f2(r.MaxOutputTokensPerS))
	row("Peak concurrent requests:", f2(r.MaxConcurrentReqs))
	row("Total token throughput (tok/s):", f2(r.TotalTokenThroughput))

	for _, m := range []struct{ key, name, header string }{
		{"ttft", "TTFT", "Time to First Token"},
		{"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
		{"itl", "ITL", "Inter-token Latency"},
		{"e2el", "E2EL", "End-to-end Latency"},
	} {
		if _, ok := r.Metrics["mean_"+m.key+"_ms"]; !ok {
			continue
		}
		title(m.header, '-')
		row("Mean "+m.name+" (ms):", f2(r.Metrics["mean_"+m.key+"_ms"]))
		row("Median "+m.name+" (ms):", f2(r.Metrics["median_"+m.key+"_ms"]))
		for _, p := range metricPercentiles(r.Metrics, m.key) {
			row("P"+p.word+" "+m.name+" (ms):", f2(p.value))
		}
	}

	if counts := errorCounts(r); len(counts) > 0 {
		title("Errors", '-')
		for _, msg := range sortedErrors(counts) {
			fmt.Fprintf(w, "%6d  %s\n", counts[msg], oneLine(msg))
		}
	}
	if sec := r.Perfgate; sec != nil && len(sec.EngineFailures) > 0 {
		title("Ended early by the engine, by prompt", '-')
		for _, f := range sec.EngineFailures {
			fmt.Fprintf(w, "prompt #%d after %d tokens: %s\n", f.Prompt, f.Tokens, oneLine(f.Words))
		}
	}
	if sec := r.Perfgate; sec != nil {
		writeTraffic(sec.Traffic, row, title)
		writeChecks(w, sec, row, f2, title)
	}
	fmt.Fprintln(w, strings.Repeat("=", 50))
}

// writeTraffic prints a traffic shape and what the run drew.
func writeTraffic(t *result.Traffic, row func(string, string), title func(string, byte)) {
	if !t.Shaped() {
		return
	}
	title("Traffic shape", '-')
	if s := t.Sessions; s != nil {
		v := fmt.Sprintf("%d × %d turns, +%d user tokens a turn", t.Counts["sessions"], s.Turns, s.UserLen)
		if s.ThinkTimeMS > 0 {
			v += fmt.Sprintf(", think %s ms", strconv.FormatFloat(s.ThinkTimeMS, 'f', -1, 64))
		}
		row("Chat sessions:", v)
	}
	for _, c := range t.PromptMix {
		row(fmt.Sprintf("Prompts %s (%d tokens):", c.Name, c.InputLen), strconv.Itoa(t.Counts["class:"+c.Name]))
	}
	for _, m := range t.Models {
		row(fmt.Sprintf("Model %s:", m.Name), strconv.Itoa(t.Counts["model:"+m.Name]))
	}
}

// writeChecks prints perfgate's own sections: the client's check on
// itself, the engine's /metrics, the error budget and the warnings.
func writeChecks(w io.Writer, sec *result.Section, row func(string, string), f2 func(float64) string, title func(string, byte)) {
	if c := sec.Client; c != nil {
		title("Client self-check", '-')
		row("Schedule lag p50 / p99 (ms):", f2(c.ScheduleLagP50MS)+" / "+f2(c.ScheduleLagP99MS))
		if c.AchievedRate > 0 {
			row("Achieved request rate (req/s):", f2(c.AchievedRate))
		}
		switch {
		case c.Cores == 0:
			row("Client CPU:", "unknown on this system")
		case c.CPUShared:
			row("Client CPU (shared with --sim):", fmt.Sprintf("%.0f%% of %d core(s)", 100*c.CPUUtilization, c.Cores))
		default:
			row("Client CPU:", fmt.Sprintf("%.0f%% of %d core(s)", 100*c.CPUUtilization, c.Cores))
		}
		if c.ClientBound {
			row("Client-bound:", "YES — "+c.Reason)
		} else {
			row("Client-bound:", "no")
		}
		writeDelivery(c.Delivery, row)
	}
	writeEngineClock(sec.EngineClock, row, f2, title)
	if m := sec.ServerMetrics; m != nil {
		title("Server cross-check", '-')
		switch {
		case !m.Available:
			row("Server metrics:", "unavailable ("+oneLine(m.Reason)+")")
		default:
			if h := m.TTFT; h != nil && h.Count > 0 {
				row("Server TTFT median / mean (ms):", f2(h.MedianMS)+" / "+f2(h.MeanMS))
				row("Server TTFT requests:", strconv.FormatFloat(h.Count, 'f', 0, 64))
			}
			if g := m.TTFTGap; g != nil {
				row("Client-server TTFT gap med/mean (ms):", f2(g.MedianMS)+" / "+f2(g.MeanMS))
			}
			if m.Preemptions != nil {
				row("Preemptions:", strconv.FormatFloat(*m.Preemptions, 'f', 0, 64))
			}
			for _, g := range []struct{ name, label string }{
				{"vllm:num_requests_running", "Running requests mean / peak:"},
				{"vllm:num_requests_waiting", "Waiting requests mean / peak:"},
			} {
				if a, ok := m.During[g.name]; ok {
					row(g.label, f2(a.Mean)+" / "+strconv.FormatFloat(a.Max, 'f', 0, 64))
				}
			}
			// vLLM before 0.10 names it gpu_cache_usage_perc; some serve both.
			for _, name := range []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} {
				if a, ok := m.During[name]; ok {
					row("KV cache usage mean / peak:", fmt.Sprintf("%.1f%% / %.1f%%", 100*a.Mean, 100*a.Max))
					break
				}
			}
			if m.PrefixCacheHitRate != nil {
				row("Prefix cache hit rate:", fmt.Sprintf("%.1f%%", 100**m.PrefixCacheHitRate))
			}
		}
	}
	if sec.ErrorRateExceeded {
		title("Error budget", '-')
		fmt.Fprintf(w, "%.1f%% of requests failed, more than --max-error-rate %.1f%%: this run measured too little to use\n",
			100*sec.ErrorRate, 100*sec.MaxErrorRate)
	}
	if len(sec.Warnings) > 0 {
		title("Warnings", '-')
		for _, msg := range sec.Warnings {
			fmt.Fprintf(w, "- %s\n", msg)
		}
	}
}

// writeDelivery prints how the tokens arrived, and whether TPOT and ITL
// measured their delivery.
func writeDelivery(d *result.Delivery, row func(string, string)) {
	if d == nil {
		return
	}
	row("Token gaps under "+strconv.FormatFloat(d.BurstGapMS, 'f', -1, 64)+" ms:", fmt.Sprintf("%.0f%% of %d", 100*d.BurstShare, d.Gaps))
	if d.DeliveryBound {
		row("TPOT/ITL delivery-bound:", "YES — "+d.Reason)
	} else {
		row("TPOT/ITL delivery-bound:", "no")
	}
}

// writeEngineClock prints the client's timings beside the engine's own
// for the same requests.
func writeEngineClock(e *result.EngineClock, row func(string, string), f2 func(float64) string, title func(string, byte)) {
	if e == nil {
		return
	}
	title("Client vs the engine's clock", '-')
	row("Requests ("+e.Engine+"), median tokens:", fmt.Sprintf("%d, %s", e.Requests, strconv.FormatFloat(e.OutputTokens, 'f', -1, 64)))
	row("TTFT client / engine load+prompt (ms):", f2(e.ClientTTFTMS)+" / "+f2(e.EngineTTFTMS))
	row("TPOT client / engine eval/count (ms):", fmt.Sprintf("%s / %s (%+.1f%%)", f2(e.ClientTPOTMS), f2(e.EngineTPOTMS), 100*e.TPOTGap))
	row("TPOT client / engine eval/(count-1):", fmt.Sprintf("%s / %s (%+.1f%%)", f2(e.ClientTPOTMS), f2(e.EngineStepMS), 100*e.StepGap))
	row("Engine wait outside its clocks (ms):", f2(e.EngineWaitMS))
}

type pctValue struct {
	p     float64
	word  string
	value float64
}

// metricPercentiles finds the pNN_<key>_ms entries, in ascending order.
func metricPercentiles(m map[string]float64, key string) []pctValue {
	var out []pctValue
	suffix := "_" + key + "_ms"
	for k, v := range m {
		if !strings.HasPrefix(k, "p") || !strings.HasSuffix(k, suffix) {
			continue
		}
		word := strings.TrimSuffix(strings.TrimPrefix(k, "p"), suffix)
		p, err := strconv.ParseFloat(word, 64)
		if err != nil {
			continue
		}
		out = append(out, pctValue{p, word, v})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].p < out[b].p })
	return out
}

// center pads s with c on both sides to n columns, like Python's "{:c^n}".
func center(s string, n int, c byte) string {
	pad := n - len(s)
	if pad <= 0 {
		return s
	}
	left := pad / 2
	return strings.Repeat(string(c), left) + s + strings.Repeat(string(c), pad-left)
}

// oneLine folds a message (vLLM stores whole tracebacks) onto one row.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// errorCounts is perfgate's tally, or one made from a vLLM file's errors.
func errorCounts(r *result.Result) map[string]int {
	if r.Perfgate != nil && r.Perfgate.ErrorCounts != nil {
		return r.Perfgate.ErrorCounts
	}
	counts := map[string]int{}
	for _, e := range r.Errors {
		if e != "" {
			counts[e]++
		}
	}
	return counts
}
