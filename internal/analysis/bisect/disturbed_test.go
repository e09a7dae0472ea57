package bisect

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDriftAfterTheEnds is the demo: the engine is 20% slower from
// commit 7 of 8, and once the ends are measured the machine gets 12%
// slower and stays so. Judged against the ends' first readings, commit 4
// (identical code to the good end) reads 12% slower than good and was
// named; interleaved with the good end it reads the same, the drift is
// seen on the good end's own runs and the ends are measured again before
// going on.
func TestDriftAfterTheEnds(t *testing.T) {
	t.Parallel()
	for seed := range 20 {
		rng := rand.New(rand.NewPCG(uint64(seed), 8))
		m := &synthetic{rng: rng, level: step(7, 0.20), cv: 0.01, machine: machine{Jump: 0.12, JumpAt: 8}}
		s := run(t, 8, m, Config{Metric: "tpot_median", Unit: "ms"})
		r := s.Result
		if r.Status != Found || r.Culprit.SHA != s.Commits[7].SHA {
			t.Fatalf("seed %d: %s %v, want commit 7\n%s", seed, r.Status, r.Culprit, s.Markdown())
		}
		if s.Reanchors == 0 || !strings.Contains(s.Markdown(), "The machine drifted") {
			t.Fatalf("seed %d: the drift went unnoticed (re-anchors %d):\n%s", seed, s.Reanchors, s.Markdown())
		}
	}
}

// TestBurstOnOneRun: a load burst that hits one run of a pair makes one
// wild difference; it is clipped, so a commit at the good level is not
// judged bad on it, and the pooled noise is not blown up by it.
func TestBurstOnOneRun(t *testing.T) {
	t.Parallel()
	s, err := New(commits(4), Config{Metric: "tpot_median"})
	if err != nil {
		t.Fatal(err)
	}
	ref := []float64{100, 100.5, 99.6, 100.2, 99.9, 100.1}
	obs := func(vals ...float64) {
		t.Helper()
		req, ok := s.Next()
		if !ok {
			t.Fatalf("done early: %s", s.Markdown())
		}
		if req.Pairs < len(vals) {
			vals = vals[:req.Pairs]
		}
		for len(vals) < req.Pairs {
			vals = append(vals, vals[len(vals)%3])
		}
		if err := s.Observe(req, Measurement{Values: vals, RefValues: ref[:len(vals)]}); err != nil {
			t.Fatal(err)
		}
	}
	obs(120, 120.3, 119.8, 120.1, 120.4, 119.9) // the bad end: +20%
	// Commit 2, at the good level, with one run 60% slow.
	obs(100.3, 160, 99.7, 100.1, 100.4, 99.8)
	for i := 0; i < 6; i++ {
		req, ok := s.Next()
		if !ok {
			break
		}
		if req.Index == 2 {
			t.Fatalf("commit 2 measured again, its burst not clipped:\n%s", s.Markdown())
		}
		if req.Index == 3 {
			obs(120, 120.3, 119.8, 120.1, 120.4, 119.9)
		} else {
			obs(100.3, 100.1, 99.7, 100.1, 100.4, 99.8)
		}
	}
	if s.Commits[2].Verdict != Good {
		t.Fatalf("commit 2 is %q, want good:\n%s", s.Commits[2].Verdict, s.Markdown())
	}
}

// TestNoisierMachine: the machine is quiet while the ends are measured and
// six times noisier after. Every later job then spreads far more than the
// ends' pairs did; set aside as disturbed each time (the pool never
// learning the new noise), the bisect re-measured one commit until its
// budget ran out (seen in the demo under a load of 28). A commit's second
// disturbed job in a row is taken as the machine's noise now.
func TestNoisierMachine(t *testing.T) {
	t.Parallel()
	for seed := range 20 {
		m := &synthetic{rng: rand.New(rand.NewPCG(uint64(seed), 9)), level: step(5, 0.20), cv: 0.005, machine: machine{JumpAt: 8, Noisier: 6}}
		s := run(t, 8, m, Config{Metric: "tpot_median"})
		if s.Result.Status == OutOfBudget || s.Result.Jobs > 16 {
			t.Fatalf("seed %d: %s after %d jobs\n%s", seed, s.Result.Status, s.Result.Jobs, s.Markdown())
		}
		if s.Result.Status == Found && s.Result.Culprit.SHA != s.Commits[5].SHA {
			t.Fatalf("seed %d: named %s, want commit 5 or cannot tell\n%s", seed, s.Result.Culprit.Title, s.Markdown())
		}
	}
}
