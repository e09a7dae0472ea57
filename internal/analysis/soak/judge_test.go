package soak

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheilSen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		xs, ys    []float64
		slope, b0 float64
	}{
		{"line", []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}, 2, 1},
		// One wild point (a scrape mid-GC) moves least squares, not the median slope.
		{"outlier", []float64{0, 1, 2, 3, 4, 5, 6}, []float64{0, 1, 2, 300, 4, 5, 6}, 1, 0},
		{"NaN skipped", []float64{0, 1, 2, 3}, []float64{0, math.NaN(), 2, 3}, 1, 0},
		{"flat", []float64{0, 1, 2}, []float64{5, 5, 5}, 0, 5},
	} {
		s, b := TheilSen(tc.xs, tc.ys)
		if math.Abs(s-tc.slope) > 1e-9 || math.Abs(b-tc.b0) > 1e-9 {
			t.Errorf("%s: slope %g intercept %g, want %g %g", tc.name, s, b, tc.slope, tc.b0)
		}
	}
	if s, _ := TheilSen([]float64{1}, []float64{1}); !math.IsNaN(s) {
		t.Errorf("one point: slope %g, want NaN", s)
	}
}

// run builds a soak run of n samples every dt seconds, shaped by f.
func run(n int, dt float64, f func(i int, at float64, s *Sample)) []Sample {
	out := make([]Sample, n)
	for i := range out {
		at := float64(i) * dt
		out[i] = Sample{AtS: at, RSSBytes: 800 << 20, GPUMemBytes: Unknown, PrefixHitRate: 0.6, KVUsage: 0.3,
			TTFTp50ms: 40, TPOTp50ms: 9, Requests: 10}
		f(i, at, &out[i])
	}
	return out
}

func TestJudge(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(sd float64) float64 { return rng.NormFloat64() * sd }
	const mb = 1 << 20
	for _, tc := range []struct {
		name    string
		samples []Sample
		failed  []string
	}{
		{"flat", run(120, 60, func(int, float64, *Sample) {}), nil},
		// GC sawtooth: 40 MB up and down every 10 samples, no trend.
		{"sawtooth", run(120, 60, func(i int, _ float64, s *Sample) { s.RSSBytes += float64(i%10) * 4 * mb }), nil},
		{"leak 200 MB/h", run(120, 60, func(_ int, at float64, s *Sample) { s.RSSBytes += at / 3600 * 200 * mb }), []string{"rss"}},
		{"leak under the sawtooth", run(120, 60, func(i int, at float64, s *Sample) {
			s.RSSBytes += at/3600*200*mb + float64(i%10)*4*mb + noise(2*mb)
		}), []string{"rss"}},
		// 40 MB/h over 2 h: under the 64 MB/h limit.
		{"slow growth", run(120, 60, func(_ int, at float64, s *Sample) { s.RSSBytes += at / 3600 * 40 * mb }), nil},
		// 20 s of run: 3600 MB/h extrapolated, but 8 MB grown, under the 16 MB floor.
		{"short run below noise floor", run(40, 0.5, func(i int, at float64, s *Sample) { s.RSSBytes += at / 20 * 8 * mb }), nil},
		{"short run leak", run(40, 0.5, func(i int, at float64, s *Sample) { s.RSSBytes += at / 20 * 100 * mb }), []string{"rss"}},
		{"gpu leak", run(120, 60, func(_ int, at float64, s *Sample) { s.GPUMemBytes = 70e9 + at/3600*500*mb }), []string{"gpu_memory"}},
		{"hit rate drifts", run(120, 60, func(_ int, at float64, s *Sample) { s.PrefixHitRate = 0.6 - 0.1*at/3600 + noise(0.01) }), []string{"prefix_hit_rate"}},
		{"kv creeps", run(120, 60, func(_ int, at float64, s *Sample) { s.KVUsage = 0.3 + 0.2*at/3600 }), []string{"kv_usage"}},
		{"ttft creeps", run(120, 60, func(_ int, at float64, s *Sample) { s.TTFTp50ms = 40 * (1 + 0.25*at/3600) }), []string{"ttft_p50"}},
		{"tpot creeps", run(120, 60, func(_ int, at float64, s *Sample) { s.TPOTp50ms = 9 * (1 + 0.3*at/3600) }), []string{"tpot_p50"}},
		{"noisy latency, no creep", run(120, 60, func(_ int, _ float64, s *Sample) { s.TTFTp50ms += noise(6); s.TPOTp50ms += noise(1) }), nil},
		// A leak confined to the warm-up (caches filling) is not a leak.
		{"warm-up growth", run(120, 60, func(i int, _ float64, s *Sample) { s.RSSBytes += float64(min(i, 20)) * 10 * mb }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Judge(tc.samples, DefaultThresholds())
			var failed []string
			for _, tr := range r.Failed() {
				failed = append(failed, tr.Name)
			}
			if len(failed) != len(tc.failed) || (len(failed) > 0 && failed[0] != tc.failed[0]) {
				t.Errorf("failed %v, want %v; trends %+v", failed, tc.failed, r.Trends)
			}
			if r.Pass != (len(tc.failed) == 0) {
				t.Errorf("pass %v with failures %v", r.Pass, failed)
			}
		})
	}
}

func TestJudgeNotMeasured(t *testing.T) {
	t.Parallel()
	r := Judge(run(5, 1, func(int, float64, *Sample) {}), DefaultThresholds())
	for _, tr := range r.Trends {
		if tr.Status != NotMeasured {
			t.Errorf("%s: %s with 4 samples after warm-up, want not measured", tr.Name, tr.Status)
		}
	}
	if !r.Pass {
		t.Error("a run too short to judge failed")
	}
	// The GPU series is unknown throughout: not measured, not a pass.
	r = Judge(run(60, 1, func(int, float64, *Sample) {}), DefaultThresholds())
	if r.Trends[1].Name != "gpu_memory" || r.Trends[1].Status != NotMeasured {
		t.Errorf("gpu trend %+v, want not measured", r.Trends[1])
	}
}

func TestThresholdsValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultThresholds().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultThresholds()
	bad.MaxRSSGrowthMBPerHour, bad.WarmupFraction, bad.MinSamples = -1, 1, 1
	if err := bad.Validate(); err == nil {
		t.Fatal("negative limit, warm-up of the whole run and one sample accepted")
	}
}

// Runs measured against the sim (internal/runner/watch's TestSoakCatchesLeak
// -update writes them): a clean engine and one leaking 500 MB per 1000
// requests, an hour of injected clock each.
func TestJudgeMeasuredRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		failed string
	}{{"clean.json", ""}, {"leak.json", "rss"}} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var samples []Sample
		if err := json.Unmarshal(b, &samples); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if !math.IsNaN(samples[0].TTFTp50ms) {
			t.Errorf("%s: the sample before any load has a TTFT: null did not read as unknown", tc.file)
		}
		th := DefaultThresholds()
		th.MaxLatencyCreepPerHour = 1
		r := Judge(samples, th)
		var failed []string
		for _, tr := range r.Failed() {
			failed = append(failed, tr.Name)
		}
		if strings.Join(failed, ",") != tc.failed {
			t.Errorf("%s: failed %v, want %q", tc.file, failed, tc.failed)
		}
	}
}
