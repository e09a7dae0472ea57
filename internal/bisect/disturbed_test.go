package bisect

import (
	"context"
	"math"
	"strings"
	"testing"
)

// disturbedOnce measures every commit at its level with a small, fixed
// spread, except commit bad's first job, whose runs a busy machine
// disturbed: the numbers of a real end-to-end bisect on the sim (a commit
// at the slow level measured 23.2, 26.9 and 24.1 ms, against 25.5 ms at
// the good end and 27.6 ms at the bad).
type disturbedOnce struct {
	level   func(i int) float64
	bad     int
	done    bool
	spreads []float64
}

func (m *disturbedOnce) Measure(_ context.Context, req Request) ([]float64, error) {
	out := make([]float64, req.Runs)
	for k := range out {
		out[k] = math.Exp(m.level(req.Index)) * m.spreads[k%len(m.spreads)]
	}
	if req.Index == m.bad && !m.done {
		m.done = true
		copy(out, []float64{23.23, 26.92, 24.14})
	}
	return out, nil
}

// TestDisturbedRunsAreMeasuredAgain: a commit whose runs disagree far more
// than the bisect's pooled noise is measured again before it is judged,
// so one disturbed job does not make a slow commit look good (which named
// the commit after the planted one as the culprit).
func TestDisturbedRunsAreMeasuredAgain(t *testing.T) {
	m := &disturbedOnce{level: func(i int) float64 {
		if i >= 2 {
			return math.Log(27.6)
		}
		return math.Log(25.5)
	}, bad: 2, spreads: []float64{1, 1.006, 0.995, 1.003, 0.998, 1.004}}
	s := run(t, 4, m, Config{Metric: "tpot_median", Unit: "ms"})
	r := s.Result
	if r == nil || r.Status != Found || r.Culprit.SHA != s.Commits[2].SHA {
		t.Fatalf("result %+v, want commit 2 found\n%s", r, s.Markdown())
	}
	if !strings.Contains(s.Markdown(), "its runs disagree") {
		t.Errorf("the report does not say the disturbed runs were measured again:\n%s", s.Markdown())
	}
}
