package agentserver

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// checkResult refuses a parsed result whose numbers cannot be true: a
// negative count, duration or latency, or a number that is not finite.
// The gate would otherwise judge them as measurements.
func checkResult(r *result.Result) error {
	var errs []error
	for _, c := range []struct {
		name string
		v    int
	}{
		{"completed", r.Completed}, {"failed", r.Failed}, {"num_prompts", r.NumPrompts},
		{"total_input_tokens", r.TotalInputTokens}, {"total_output_tokens", r.TotalOutputTokens},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %d: a count cannot be negative", c.name, c.v))
		}
	}
	if r.Completed+r.Failed == 0 && len(r.Metrics) == 0 {
		errs = append(errs, errors.New("no request completed or failed and no metric: the run measured nothing"))
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"duration", r.Duration}, {"request_throughput", r.RequestThroughput},
		{"output_throughput", r.OutputThroughput}, {"total_token_throughput", r.TotalTokenThroughput},
	} {
		if err := nonNegative(c.name, c.v); err != nil {
			errs = append(errs, err)
		}
	}
	keys := make([]string, 0, len(r.Metrics))
	for k := range r.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := nonNegative(k, r.Metrics[k]); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, negativeIn("ttfts", r.TTFTs), negativeIntsIn("input_lens", r.InputLens), negativeIntsIn("output_lens", r.OutputLens))
	for i, gaps := range r.ITLs {
		if err := negativeIn(fmt.Sprintf("itls[%d]", i), gaps); err != nil {
			errs = append(errs, err)
			break
		}
	}
	if p := r.Perfgate; p != nil {
		errs = append(errs, negativeIn("perfgate.e2els_ms", p.E2ELs), negativeIn("perfgate.tpots_ms", p.TPOTs))
		if math.IsNaN(p.ErrorRate) || p.ErrorRate < 0 || p.ErrorRate > 1 {
			errs = append(errs, fmt.Errorf("perfgate.error_rate is %g: must be in [0, 1]", p.ErrorRate))
		}
		for msg, n := range p.ErrorCounts {
			if n < 0 {
				errs = append(errs, fmt.Errorf("perfgate.error_counts[%q] is %d: a count cannot be negative", msg, n))
			}
		}
	}
	return errors.Join(errs...)
}

func nonNegative(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%s is %g: must be a finite number >= 0", name, v)
	}
	return nil
}

func negativeIn(name string, vs []float64) error {
	for i, v := range vs {
		if err := nonNegative(fmt.Sprintf("%s[%d]", name, i), v); err != nil {
			return err
		}
	}
	return nil
}

func negativeIntsIn(name string, vs []int) error {
	for i, v := range vs {
		if v < 0 {
			return fmt.Errorf("%s[%d] is %d: must be >= 0", name, i, v)
		}
	}
	return nil
}
