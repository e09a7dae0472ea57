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

	"github.com/perfgate/perfgate/internal/result"
)

var update = flag.Bool("update", false, "rewrite golden files")

// synthetic measures commit i as 100·exp(level(i)) with log-normal
// run-to-run noise of cv; commits in fail cannot be measured.
type synthetic struct {
	rng   *rand.Rand
	level func(i int) float64
	cv    float64
	fail  map[int]bool
	calls int
}

func (m *synthetic) Measure(_ context.Context, req Request) ([]float64, error) {
	m.calls++
	if m.fail[req.Index] {
		return nil, fmt.Errorf("%w: build failed", ErrUnmeasurable)
	}
	out := make([]float64, req.Runs)
	for k := range out {
		out[k] = 100 * math.Exp(m.level(req.Index)+m.cv*m.rng.NormFloat64())
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

// TestSyntheticBisect plants one step at a random commit among N and bisects
// with noise, over many seeds: the culprit is found in ⌈log2 N⌉ steps and a
// few more GPU jobs than that. -v prints the figures the README quotes:
//
//	go test -run TestSyntheticBisect -v ./internal/bisect
func TestSyntheticBisect(t *testing.T) {
	seeds := 1000
	if testing.Short() {
		seeds = 200
	}
	cases := []struct {
		n          int
		step, cv   float64
		minFound   float64 // share of seeds that must find the planted commit
		maxMeanJob float64
	}{
		{16, 0.10, 0.02, 0.97, 9},
		{64, 0.10, 0.02, 0.97, 12},
		{16, 0.05, 0.02, 0.95, 16},
		{64, 0.05, 0.02, 0.95, 22},
		{16, 0.10, 0.05, 0.88, 16},
		{64, 0.10, 0.05, 0.88, 20},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("N=%d/step=%.0f%%/cv=%.0f%%", tc.n, 100*tc.step, 100*tc.cv), func(t *testing.T) {
			found, sumSteps, maxSteps, sumJobs, maxJobs, sumRuns := 0, 0, 0, 0, 0, 0
			for seed := range seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(tc.n)))
				at := 1 + rng.IntN(tc.n)
				s := run(t, tc.n, &synthetic{rng: rng, level: step(at, tc.step), cv: tc.cv}, Config{})
				r := s.Result
				if r.Status == Found && r.Culprit.SHA == s.Commits[at].SHA {
					found++
				}
				sumSteps += r.Steps
				maxSteps = max(maxSteps, r.Steps)
				sumJobs += r.Jobs
				maxJobs = max(maxJobs, r.Jobs)
				sumRuns += r.Runs
				if r.Steps > ceilLog2(tc.n) {
					t.Errorf("seed %d: %d steps for N=%d, more than ⌈log2 N⌉ = %d without a skipped commit", seed, r.Steps, tc.n, ceilLog2(tc.n))
				}
			}
			share := float64(found) / float64(seeds)
			meanJobs := float64(sumJobs) / float64(seeds)
			t.Logf("N=%d, step %+.0f%%, run-to-run CV %.0f%%, %d seeds: planted commit found %.1f%%; steps mean %.2f worst %d (⌈log2 N⌉ = %d); GPU jobs mean %.2f worst %d; runs mean %.1f",
				tc.n, 100*tc.step, 100*tc.cv, seeds, 100*share, float64(sumSteps)/float64(seeds), maxSteps, ceilLog2(tc.n),
				meanJobs, maxJobs, float64(sumRuns)/float64(seeds))
			if share < tc.minFound {
				t.Errorf("found the planted commit in %.1f%% of seeds, want ≥ %.0f%%", 100*share, 100*tc.minFound)
			}
			if meanJobs > tc.maxMeanJob {
				t.Errorf("mean GPU jobs %.2f, want ≤ %.0f", meanJobs, tc.maxMeanJob)
			}
		})
	}
}

func TestSkippedCommits(t *testing.T) {
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
		if r.Steps > ceilLog2(16)+1 {
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
	s = run(t, 16, &synthetic{rng: rand.New(rand.NewPCG(7, 8)), level: step(8, 0.04), cv: 0.08}, Config{MaxRuns: 6})
	if st := s.Result.Status; st != Unclear && st != NoDifference {
		t.Fatalf("status %s, want unclear\n%s", st, s.Markdown())
	}
}

func TestBudget(t *testing.T) {
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
	s, err := New(commits(4), Config{Metric: "ttft_p90"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := s.Next()
	for _, vals := range [][]float64{nil, {1, 0, 2}, {1, math.NaN()}, {math.Inf(1)}, {-3}} {
		if err := s.Observe(req, vals); err == nil || errors.Is(err, ErrStale) {
			t.Errorf("Observe(%v) = %v, want a value error", vals, err)
		}
	}
	if err := s.Observe(Request{Seq: req.Seq + 1, SHA: req.SHA}, []float64{1}); !errors.Is(err, ErrStale) {
		t.Errorf("observe of an unknown request: %v", err)
	}
	if err := s.Observe(req, []float64{1, 1.01, 0.99}); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejects(t *testing.T) {
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
