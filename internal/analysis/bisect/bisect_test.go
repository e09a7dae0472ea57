package bisect

import (
	"context"
	"crypto/sha1"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

var update = flag.Bool("update", false, "rewrite golden files")

// synthetic is a machine that measures commit i as 100·exp(level(i)) with
// log-normal run-to-run noise of cv, optionally drifting, taking load
// bursts and heavy-tailed runs (machine); commits in fail cannot be
// measured. Runs are made in the ABBA order the agent uses — reference
// first in even pairs, the commit first in odd ones — and the machine's
// clock advances one tick per run, so drift and bursts fall on the
// reference and the commit as they would on a real card.
type synthetic struct {
	rng   *rand.Rand
	level func(i int) float64
	cv    float64
	fail  map[int]bool
	calls int
	machine
}

// machine is what a busy host adds to a run's log value at tick t.
type machine struct {
	// Walk is the standard deviation of a random walk's step per run;
	// Swing and Period a slow oscillation (a neighbour's nightly job).
	Walk, Swing, Period float64
	// Burst is the chance a run starts a load burst that slows BurstLen
	// runs by up to BurstSize (uniformly drawn).
	Burst, BurstSize float64
	BurstLen         int
	// Tail, when > 0, draws the noise from Student's t with Tail degrees
	// of freedom (scaled to cv); Outlier is the chance of a whole-run
	// outlier up to 50% slower.
	Tail, Outlier float64
	// Jump slows every run after tick JumpAt by Jump (a neighbour's job
	// that starts and stays).
	Jump   float64
	JumpAt int
	// Noisier multiplies the run-to-run noise after tick JumpAt.
	Noisier float64

	t          int
	walk       float64
	burstLeft  int
	burstLevel float64
}

// at is the machine's offset for the next run, advancing its clock.
func (m *machine) at(rng *rand.Rand) float64 {
	m.t++
	m.walk += m.Walk * rng.NormFloat64()
	off := m.walk
	if m.Jump != 0 && m.t > m.JumpAt {
		off += math.Log1p(m.Jump)
	}
	if m.Period > 0 {
		off += m.Swing * math.Sin(2*math.Pi*float64(m.t)/m.Period)
	}
	if m.burstLeft == 0 && m.Burst > 0 && rng.Float64() < m.Burst {
		m.burstLeft, m.burstLevel = 1+rng.IntN(max(1, m.BurstLen)), math.Log1p(m.BurstSize*rng.Float64())
	}
	if m.burstLeft > 0 {
		m.burstLeft--
		off += m.burstLevel
	}
	if m.Outlier > 0 && rng.Float64() < m.Outlier {
		off += math.Log1p(0.1 + 0.4*rng.Float64())
	}
	return off
}

func (m *synthetic) noise() float64 {
	if m.Tail > 0 {
		// Student's t scaled to unit variance.
		z := m.rng.NormFloat64()
		chi := 0.0
		for range int(m.Tail) {
			g := m.rng.NormFloat64()
			chi += g * g
		}
		return z / math.Sqrt(chi/m.Tail) * math.Sqrt((m.Tail-2)/m.Tail)
	}
	return m.rng.NormFloat64()
}

func (m *synthetic) run(i int) float64 {
	off := m.at(m.rng)
	cv := m.cv
	if m.Noisier > 0 && m.t > m.JumpAt {
		cv *= m.Noisier
	}
	return 100 * math.Exp(m.level(i)+off+cv*m.noise())
}

func (m *synthetic) Measure(_ context.Context, req Request) (Measurement, error) {
	m.calls++
	if m.fail[req.Index] || m.fail[req.Ref] {
		return Measurement{}, fmt.Errorf("%w: build failed", ErrUnmeasurable)
	}
	var out Measurement
	for k := range req.Pairs {
		if k%2 == 0 {
			out.RefValues = append(out.RefValues, m.run(req.Ref))
			out.Values = append(out.Values, m.run(req.Index))
		} else {
			out.Values = append(out.Values, m.run(req.Index))
			out.RefValues = append(out.RefValues, m.run(req.Ref))
		}
	}
	return out, nil
}

// step is a level that moves by log(1+size) at commit at.
func step(at int, size float64) func(int) float64 {
	return func(i int) float64 {
		if i >= at {
			return math.Log1p(size)
		}
		return 0
	}
}

func commits(n int) []Commit {
	out := make([]Commit, n+1)
	for i := range out {
		out[i] = Commit{SHA: fmt.Sprintf("%x", sha1.Sum([]byte{byte(i), byte(i >> 8)})), Title: fmt.Sprintf("commit %d", i)}
	}
	return out
}

func run(t testing.TB, n int, m Measurer, cfg Config) *State {
	t.Helper()
	if cfg.Metric == "" {
		cfg.Metric = "tpot_p90"
	}
	s, err := New(commits(n), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), s, m, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// machines are the hosts the synthetic suite bisects on: run-to-run noise
// of 2% everywhere, and what a shared, busy host adds. The drift moves the
// level by ±10% over a few hundred runs (the issue's "identical code read
// 11–12% slower than a good end measured minutes earlier"); bursts slow up
// to 8 runs in a row by up to 40%; heavy tails are Student's t with 3
// degrees of freedom plus 3% of runs up to 50% slow.
var machines = []struct {
	name string
	m    machine
}{
	{"quiet", machine{}},
	{"drift", machine{Walk: 0.004, Swing: 0.10, Period: 400}},
	{"bursts", machine{Burst: 0.03, BurstSize: 0.4, BurstLen: 8}},
	{"heavy tails", machine{Tail: 3, Outlier: 0.03}},
	{"busy (all three)", machine{Walk: 0.004, Swing: 0.10, Period: 400, Burst: 0.03, BurstSize: 0.4, BurstLen: 8, Tail: 3, Outlier: 0.03}},
}

// TestSyntheticBisect plants one step at a random commit among N and bisects
// on each machine, over many seeds: the planted commit is named in ≥ 95% of
// bisects, another commit in ≤ 2% (the rest say they cannot tell). -v
// prints the table docs/bisect.md quotes:
//
//	go test -run TestSyntheticBisect -v ./internal/analysis/bisect
func TestSyntheticBisect(t *testing.T) {
	t.Parallel()
	seeds := 1000
	if testing.Short() {
		seeds = 150
	}
	type tc struct {
		n        int
		step, cv float64
		machine  string
		m        machine
		minFound float64 // share of seeds that must name the planted commit
		maxWrong float64 // share that may name another
	}
	var cases []tc
	for _, n := range []int{16, 64} {
		for _, mc := range machines {
			cases = append(cases, tc{n, 0.08, 0.02, mc.name, mc.m, 0.95, 0.02})
		}
	}
	cases = append(cases, tc{16, 0.05, 0.02, "quiet", machine{}, 0.95, 0.02}, tc{64, 0.20, 0.05, "busy (all three)", machines[4].m, 0.95, 0.02})
	t.Logf("| N | step | machine | named the planted commit | cannot tell | named another | GPU jobs mean (worst) | runs mean |")
	t.Logf("|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, tc := range cases {
		t.Run(fmt.Sprintf("N=%d/step=%.0f%%/%s", tc.n, 100*tc.step, tc.machine), func(t *testing.T) {
			found, wrong, sumJobs, maxJobs, sumRuns := 0, 0, 0, 0, 0
			for seed := range seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(tc.n)))
				at := 1 + rng.IntN(tc.n)
				s := run(t, tc.n, &synthetic{rng: rng, level: step(at, tc.step), cv: tc.cv, machine: tc.m}, Config{})
				r := s.Result
				switch {
				case r.Status == Found && r.Culprit.SHA == s.Commits[at].SHA:
					found++
				case r.Status == Found:
					wrong++
				}
				sumJobs += r.Jobs
				maxJobs = max(maxJobs, r.Jobs)
				sumRuns += r.Runs
			}
			share, wrongShare := float64(found)/float64(seeds), float64(wrong)/float64(seeds)
			t.Logf("| %d | %+.0f%% | %s | %.1f%% | %.1f%% | %.1f%% | %.1f (%d) | %.0f |", tc.n, 100*tc.step, tc.machine,
				100*share, 100*(1-share-wrongShare), 100*wrongShare, float64(sumJobs)/float64(seeds), maxJobs, float64(sumRuns)/float64(seeds))
			if share < tc.minFound {
				t.Errorf("named the planted commit in %.1f%% of %d seeds, want ≥ %.0f%%", 100*share, seeds, 100*tc.minFound)
			}
			if wrongShare > tc.maxWrong {
				t.Errorf("named another commit in %.1f%% of %d seeds, want ≤ %.0f%%", 100*wrongShare, seeds, 100*tc.maxWrong)
			}
		})
	}
}

func TestSkippedCommits(t *testing.T) {
	t.Parallel()
	t.Run("skipped midpoints are stepped around", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		// Commit 8 is the first midpoint; 7 and 9 are the nearest after it.
		m := &synthetic{rng: rng, level: step(11, 0.2), cv: 0.01, fail: map[int]bool{7: true, 8: true, 9: true}}
		s := run(t, 16, m, Config{})
		r := s.Result
		if r.Status != Found || r.Culprit.SHA != s.Commits[11].SHA {
			t.Fatalf("result %s %+v, want commit 11 found\n%s", r.Status, r.Culprit, s.Markdown())
		}
		for _, i := range []int{7, 8, 9} {
			if s.Commits[i].Skip == "" {
				t.Errorf("commit %d failed but is not marked skipped", i)
			}
		}
		if got := strings.Count(s.Markdown(), "skipped: commit cannot be measured: build failed"); got != 3 {
			t.Errorf("report shows %d skips, want 3:\n%s", got, s.Markdown())
		}
		if r.Steps > Steps(16)+1 {
			t.Errorf("%d commits measured between the ends, want at most ⌈log2 16⌉+1", r.Steps)
		}
	})
	t.Run("only skipped commits left is a range", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		m := &synthetic{rng: rng, level: step(6, 0.2), cv: 0.01, fail: map[int]bool{5: true, 6: true}}
		s := run(t, 16, m, Config{})
		r := s.Result
		if r.Status != Range {
			t.Fatalf("status %s, want range\n%s", r.Status, s.Markdown())
		}
		var got []string
		for _, c := range r.Candidates {
			got = append(got, c.Title)
		}
		// Commit 4 good, 7 bad: the change is at 5, 6 or 7.
		if want := "commit 5,commit 6,commit 7"; strings.Join(got, ",") != want {
			t.Errorf("candidates %v, want %s", got, want)
		}
		if !strings.Contains(r.Message, "could not be measured") {
			t.Errorf("message %q", r.Message)
		}
	})
	t.Run("an end that fails stops the bisect", func(t *testing.T) {
		m := &synthetic{rng: rand.New(rand.NewPCG(5, 6)), level: step(3, 0.2), cv: 0.01, fail: map[int]bool{0: true}}
		s := run(t, 8, m, Config{})
		if s.Result.Status != EndFailed || !strings.Contains(s.Result.Message, "good end") {
			t.Fatalf("result %+v", s.Result)
		}
	})
}

func TestTwoSteps(t *testing.T) {
	t.Parallel()
	// +10% at 5 and another +10% at 12: the first is reported, and the
	// report says there is more than one change.
	level := func(i int) float64 {
		l := 0.0
		if i >= 5 {
			l += math.Log(1.1)
		}
		if i >= 12 {
			l += math.Log(1.1)
		}
		return l
	}
	notes := 0
	for seed := range 50 {
		s := run(t, 16, &synthetic{rng: rand.New(rand.NewPCG(uint64(seed), 9)), level: level, cv: 0.01}, Config{})
		r := s.Result
		if r.Status != Found || r.Culprit.SHA != s.Commits[5].SHA {
			t.Fatalf("seed %d: %s %v, want commit 5\n%s", seed, r.Status, r.Culprit, s.Markdown())
		}
		if strings.Contains(strings.Join(r.Notes, " "), "second change") || strings.Contains(strings.Join(r.Notes, " "), "More than one change") {
			notes++
		}
	}
	if notes < 48 {
		t.Errorf("the second change was reported in %d of 50 bisects, want ≥ 48", notes)
	}
}

func TestNoDifference(t *testing.T) {
	t.Parallel()
	s := run(t, 16, &synthetic{rng: rand.New(rand.NewPCG(7, 8)), level: func(int) float64 { return 0 }, cv: 0.005}, Config{})
	if s.Result.Status != NoDifference {
		t.Fatalf("status %s, want no-difference\n%s", s.Result.Status, s.Markdown())
	}
	if !strings.Contains(s.Result.Message, "no change to bisect") {
		t.Errorf("message %q", s.Result.Message)
	}
	if s.Result.Steps != 0 {
		t.Errorf("measured %d commits between ends that do not differ", s.Result.Steps)
	}

	// Noise too large for the runs allowed: unclear, said so.
	s = run(t, 16, &synthetic{rng: rand.New(rand.NewPCG(7, 8)), level: step(8, 0.04), cv: 0.08}, Config{MaxPairs: 16, MaxJobPairs: 8})
	if st := s.Result.Status; st != Unclear && st != NoDifference {
		t.Fatalf("status %s, want unclear\n%s", st, s.Markdown())
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()
	s := run(t, 64, &synthetic{rng: rand.New(rand.NewPCG(1, 1)), level: step(40, 0.2), cv: 0.01}, Config{MaxJobs: 4})
	r := s.Result
	if r.Status != OutOfBudget || r.Jobs != 4 {
		t.Fatalf("status %s after %d jobs, want budget after 4\n%s", r.Status, r.Jobs, s.Markdown())
	}
	in := false
	for _, c := range r.Candidates {
		in = in || c.SHA == s.Commits[40].SHA
	}
	if !in || len(r.Candidates) >= 64 {
		t.Errorf("candidates (%d) do not narrow to a range holding the planted commit", len(r.Candidates))
	}
}

// TestResume saves the state after every step, reloads it from JSON and
// goes on: the result is the one an uninterrupted run reaches.
func TestResume(t *testing.T) {
	t.Parallel()
	want := run(t, 32, &synthetic{rng: rand.New(rand.NewPCG(11, 12)), level: step(19, 0.08), cv: 0.02}, Config{})

	m := &synthetic{rng: rand.New(rand.NewPCG(11, 12)), level: step(19, 0.08), cv: 0.02}
	s, err := New(commits(32), Config{Metric: "tpot_p90"})
	if err != nil {
		t.Fatal(err)
	}
	restarts := 0
	for {
		data, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if s, err = Load(data); err != nil {
			t.Fatal(err)
		}
		restarts++
		req, ok := s.Next()
		if !ok {
			break
		}
		// A restart between issuing a request and observing it: the
		// reloaded state asks for the same request again.
		data, err = s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Load(data)
		if err != nil {
			t.Fatal(err)
		}
		if req2, _ := again.Next(); req2 != req {
			t.Fatalf("after reload the pending request is %+v, want %+v", req2, req)
		}
		s = again
		vals, err := m.Measure(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Observe(req, vals); err != nil {
			t.Fatal(err)
		}
		// A redelivered result is refused, not counted twice.
		if err := s.Observe(req, vals); !errors.Is(err, ErrStale) {
			t.Fatalf("second observe of request %d: %v, want ErrStale", req.Seq, err)
		}
	}
	if s.Result.Culprit.SHA != want.Result.Culprit.SHA || s.Result.Jobs != want.Result.Jobs || s.Markdown() != want.Markdown() {
		t.Errorf("resumed bisect differs:\n%s\nuninterrupted:\n%s", s.Markdown(), want.Markdown())
	}
	if restarts < 5 {
		t.Errorf("only %d reloads", restarts)
	}
}

func TestObserveRejects(t *testing.T) {
	t.Parallel()
	s, err := New(commits(4), Config{Metric: "ttft_p90"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := s.Next()
	for _, m := range []Measurement{{}, {Values: []float64{1, 2}, RefValues: []float64{1}}, {Values: []float64{1, 0}, RefValues: []float64{1, 1}},
		{Values: []float64{1}, RefValues: []float64{math.NaN()}}, {Values: []float64{math.Inf(1)}, RefValues: []float64{1}}, {Values: []float64{-3}, RefValues: []float64{1}}} {
		if err := s.Observe(req, m); err == nil || errors.Is(err, ErrStale) {
			t.Errorf("Observe(%v) = %v, want a value error", m, err)
		}
	}
	if err := s.Observe(Request{Seq: req.Seq + 1, SHA: req.SHA, RefSHA: req.RefSHA}, Measurement{Values: []float64{1}, RefValues: []float64{1}}); !errors.Is(err, ErrStale) {
		t.Errorf("observe of an unknown request: %v", err)
	}
	if err := s.Observe(req, Measurement{Values: []float64{1, 1.01, 0.99}, RefValues: []float64{1, 1, 1}}); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	cs := commits(3)
	cases := []struct {
		name    string
		commits []Commit
		cfg     Config
		want    string
	}{
		{"one commit", cs[:1], Config{Metric: "m"}, "good and a bad"},
		{"no metric", cs, Config{}, "metric"},
		{"duplicate", append(append([]Commit(nil), cs...), cs[1]), Config{Metric: "m"}, "twice"},
		{"empty sha", []Commit{{SHA: "a"}, {}}, Config{Metric: "m"}, "no SHA"},
	}
	for _, tc := range cases {
		if _, err := New(tc.commits, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load([]byte(`{"version":99}`)); err == nil {
		t.Error("Load accepted version 99")
	}
}

func TestMarkdownGolden(t *testing.T) {
	t.Parallel()
	m := &synthetic{rng: rand.New(rand.NewPCG(21, 22)), level: step(6, 0.15), cv: 0.02}
	cs := commits(12)
	cs[6].Title, cs[6].PR = "scheduler: let prefill into running decode batches (#57)", 57
	cs[6].URL = "https://github.com/acme/llm/commit/" + cs[6].SHA
	s, err := New(cs, Config{Repo: "acme/llm", Metric: "tpot_p90", Unit: "ms"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), s, m, nil); err != nil {
		t.Fatal(err)
	}
	got := s.Markdown()
	path := filepath.Join("testdata", "report.md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (run with -update after checking):\n%s", path, got)
	}
}

func TestPRFromMessage(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		"scheduler: prefill first (#57)":                      57,
		"scheduler: prefill first (#57)\n\nlonger text (#99)": 57,
		"Merge pull request #123 from acme/branch\n\nsched":   123,
		"fix #12 in the middle":                               0,
		"no reference":                                        0,
		"(#5) at the start":                                   0,
	}
	for msg, want := range cases {
		if got := PRFromMessage(msg); got != want {
			t.Errorf("PRFromMessage(%q) = %d, want %d", msg, got, want)
		}
	}
}

func TestRunValues(t *testing.T) {
	t.Parallel()
	mk := func(tpot float64) *result.Result {
		return &result.Result{Completed: 10, Metrics: map[string]float64{"median_tpot_ms": tpot}}
	}
	got, err := RunValues([]*result.Result{mk(10), mk(12.5)}, "tpot_median")
	if err != nil || fmt.Sprint(got) != "[10 12.5]" {
		t.Fatalf("RunValues = %v, %v", got, err)
	}
	if _, err := RunValues([]*result.Result{mk(10), mk(0)}, "tpot_median"); err == nil || !strings.Contains(err.Error(), "run 2 of 2") {
		t.Errorf("a run without the metric: %v", err)
	}
}
