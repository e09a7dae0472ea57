package agentserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Bounds on what one result upload may cost the server. A result is read
// whole and decoded into per-request arrays (about ten times its size in
// memory), so the server bounds the body by what the job's plan can
// produce, and the bytes being decoded at once by a shared budget.
const (
	// DefaultResultBudget is the result bytes decoded at once across all
	// uploads; an upload that does not fit waits, then is answered 503
	// with Retry-After (the agent retries).
	DefaultResultBudget = 128 << 20
	// resultWait is how long an upload waits for room in the budget.
	resultWait = 10 * time.Second
	// Per-request size of a result: its entries in the per-request arrays
	// (TTFT, lengths, error, E2EL, TPOT, text) and one inter-token gap per
	// output token.
	resultPerRequest = 1 << 10
	resultPerToken   = 48
	// assumedOutputLen stands in for a plan whose dataset sets the output
	// lengths.
	assumedOutputLen = 4096
	// maxLatency bounds a latency: no request of a benchmark runs a day.
	maxLatency = 24 * time.Hour
	// maxThroughput bounds a throughput in tokens or requests per second.
	maxThroughput = 1e9
)

// resultLimit is the largest result body the plan can produce: a result
// for more requests than the plan sends is refused before it is read.
func resultLimit(p agentapi.Plan) int64 {
	n := int64(max(p.Workload.NumPrompts, p.Warmup, 1))
	if p.Profile != nil {
		n = max(n, int64(p.Profile.Requests))
	}
	out := int64(p.Workload.OutputLen)
	if out <= 0 {
		out = assumedOutputLen
	}
	return min(maxResultBody, 1<<20+n*(resultPerRequest+out*resultPerToken))
}

// resultBudget shares DefaultResultBudget (or Options.ResultBudget) among
// concurrent uploads.
type resultBudget struct {
	sem   *semaphore.Weighted
	total int64
	wait  time.Duration
}

func newResultBudget(total int64, wait time.Duration) *resultBudget {
	if total <= 0 {
		total = DefaultResultBudget
	}
	if wait <= 0 {
		wait = resultWait
	}
	return &resultBudget{sem: semaphore.NewWeighted(total), total: total, wait: wait}
}

// take reserves n bytes, waiting up to b.wait; release gives them back.
func (b *resultBudget) take(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 1), b.total)
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	if resultTaken != nil {
		resultTaken()
	}
	return func() { b.sem.Release(n) }, nil
}

// resultTaken, when set (by tests), is called when an upload has taken
// its share of the budget.
var resultTaken func()

// busy answers an upload that found no room in the budget.
func busy(w http.ResponseWriter, jobID int64) {
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("results of job %d: the server is decoding other results; retry in a few seconds", jobID))
}

// checkPlanned refuses a result its job's plan could not have produced:
// more requests than the plan sends, per-request arrays whose lengths
// disagree with the counts, a latency over a day, a throughput over 1e9/s.
func checkPlanned(p agentapi.Plan, kind string, r *result.Result) error {
	var errs []error
	planned := p.Workload.NumPrompts
	what := "num_prompts"
	if kind == "warmup" {
		planned, what = max(p.Warmup, p.Workload.NumPrompts), "warmup"
	}
	n := r.Completed + r.Failed
	if planned > 0 && (n > planned || r.Completed > planned || r.Failed > planned) {
		errs = append(errs, fmt.Errorf("completed %d + failed %d: the plan sends %d requests (%s)", r.Completed, r.Failed, planned, what))
	}
	if planned > 0 && r.NumPrompts > planned {
		errs = append(errs, fmt.Errorf("num_prompts %d: the plan sends %d", r.NumPrompts, planned))
	}
	type array struct {
		name string
		n    int
	}
	arrays := []array{{"ttfts", len(r.TTFTs)}, {"input_lens", len(r.InputLens)}, {"output_lens", len(r.OutputLens)}, {"itls", len(r.ITLs)}, {"errors", len(r.Errors)}}
	if s := r.Perfgate; s != nil {
		arrays = append(arrays, array{"perfgate.e2els_ms", len(s.E2ELs)}, array{"perfgate.tpots_ms", len(s.TPOTs)})
	}
	for _, a := range arrays {
		// One entry per completed request, or per request sent.
		if a.n != 0 && (a.n < r.Completed || a.n > n) {
			errs = append(errs, fmt.Errorf("%s has %d entries for %d completed and %d failed requests", a.name, a.n, r.Completed, r.Failed))
		}
	}
	for k, v := range r.Metrics {
		if strings.HasSuffix(k, "_ms") && v > float64(maxLatency.Milliseconds()) {
			errs = append(errs, fmt.Errorf("%s is %g ms: over a day, not a measurement", k, v))
		}
		if strings.Contains(k, "throughput") && v > maxThroughput {
			errs = append(errs, fmt.Errorf("%s is %g: over %g per second", k, v, maxThroughput))
		}
	}
	if r.Duration > maxLatency.Seconds() {
		errs = append(errs, fmt.Errorf("duration is %g s: over a day", r.Duration))
	}
	for _, t := range []struct {
		name string
		v    float64
	}{{"request_throughput", r.RequestThroughput}, {"output_throughput", r.OutputThroughput}, {"total_token_throughput", r.TotalTokenThroughput}} {
		if t.v > maxThroughput {
			errs = append(errs, fmt.Errorf("%s is %g: over %g per second", t.name, t.v, maxThroughput))
		}
	}
	for i, v := range r.TTFTs {
		if v > maxLatency.Seconds() {
			errs = append(errs, fmt.Errorf("ttfts[%d] is %g s: over a day", i, v))
			break
		}
	}
	return errors.Join(errs...)
}

// missingRuns says which of the plan's measured runs a job finishing
// succeeded has not uploaded, or "".
func missingRuns(p agentapi.Plan, stored int) string {
	if p.Profile != nil || p.Capacity != nil || p.Soak != nil {
		return ""
	}
	if want := len(p.Schedule()); stored < want {
		return fmt.Sprintf("%d of the plan's %d measured runs are stored", stored, want)
	}
	return ""
}
