package watch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/soak"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/runner/sim"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// childEnv makes the test binary serve a sim engine instead of testing:
// the soak watches a real engine process, as the agent watches vLLM.
const childEnv = "PERFGATE_WATCH_SIM_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		serveChild(strings.Fields(args))
		return
	}
	os.Exit(m.Run())
}

func serveChild(args []string) {
	fs := newFlagSet()
	overlay := sim.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := overlay(sim.DefaultConfig())
	err := sim.Serve(context.Background(), cfg, "127.0.0.1:0", func(addr string) { fmt.Println(addr) })
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// startEngine runs the sim as a child process with the given flags and
// returns its URL and PID.
func startEngine(t *testing.T, flags string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+flags)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatalf("engine did not start: %v", err)
	}
	return "http://" + strings.TrimSpace(string(buf[:n])), cmd.Process.Pid
}

// stepClock is the soak's injected clock: each window of real load
// counts as Step of soak time, so a few seconds of requests stand for an
// hour of them.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func soakRun(t *testing.T, flags string, gpuDev GPUMemory) []soak.Sample {
	t.Helper()
	url, pid := startEngine(t, flags)
	clock := &stepClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	samples, err := Run(ctx, Options{
		Bench:    bench.Options{Target: url, Endpoint: bench.EndpointCompletions, InputLen: 64, OutputLen: 8, Seed: 1, CPUShared: true},
		Rate:     40,
		Duration: time.Hour,
		Window:   time.Second, // 40 requests a window
		PID:      pid,
		GPU:      gpuDev,
		Clock:    clock,
		Run: func(ctx context.Context, o bench.Options) (*result.Result, error) {
			defer clock.advance(5 * time.Minute)
			return bench.Run(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// The soak tier catches a planted leak in a real engine process and
// passes the same engine without it.
func TestSoakCatchesLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two engine processes under load for about half a minute")
	}
	base := "--decode-step=1ms --base-ttft=1ms --prefill-per-token=0s --jitter=0 --card-cv=0 --session-cv=0 --drift-per-hour=0 --throttle-every=0s"
	for _, tc := range []struct {
		name   string
		flags  string
		failed []string
	}{
		{"clean", base, nil},
		// 40 requests × 12 windows × 0.5 MB = 240 MB over the hour.
		{"leak", base + " --leak-mb-per-1k-requests=500", []string{"rss"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samples := soakRun(t, tc.flags, gpu.NewFake("GPU-soak"))
			// A compressed hour is a dozen seconds of load on a shared
			// machine: its latencies move with the neighbours, so only
			// memory is held to the nightly limits here.
			th := soak.DefaultThresholds()
			th.MaxLatencyCreepPerHour = 1
			rep := soak.Judge(samples, th)
			var failed []string
			for _, tr := range rep.Failed() {
				failed = append(failed, tr.Name)
			}
			var md strings.Builder
			_ = soak.Markdown(&md, rep)
			t.Log("\n" + md.String())
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed trends %v, want %v", failed, tc.failed)
			}
			if len(samples) != 13 {
				t.Errorf("%d samples, want the start and 12 windows", len(samples))
			}
			if rep.Trends[1].Status != soak.Pass {
				t.Errorf("gpu memory trend %s, want pass (the fake card's memory is flat)", rep.Trends[1].Status)
			}
			if *update {
				writeFixture(t, tc.name, samples)
			}
		})
	}
}

func TestRSS(t *testing.T) {
	t.Parallel()
	rss, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 {
		t.Errorf("this process's RSS reads %v bytes", rss)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"1": "Name:\tvllm\nVmRSS:\t  2048 kB\n",
		"2": "Name:\tkthreadd\n",
		"3": "VmRSS:\t2048 MB\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "status"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := procRoot
	procRoot = dir
	defer func() { procRoot = old }()
	if v, err := RSS(1); err != nil || v != 2048*1024 {
		t.Errorf("RSS(1) = %v, %v; want 2 MiB", v, err)
	}
	for _, pid := range []int{2, 3, 4} {
		if _, err := RSS(pid); err == nil {
			t.Errorf("RSS(%d): no error", pid)
		}
	}
}
