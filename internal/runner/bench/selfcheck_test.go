package bench

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

func TestSelfCheckRules(t *testing.T) {
	t0 := time.Unix(100, 0)
	recs := func(lag, held time.Duration, latency float64) []record {
		out := make([]record, 100)
		for i := range out {
			due := t0.Add(time.Duration(i) * 10 * time.Millisecond)
			out[i] = record{ok: true, due: due, start: due.Add(lag), sent: due.Add(lag + held), latency: latency}
		}
		return out
	}
	mark := func(cpu time.Duration, wall time.Duration) cpuMark {
		return cpuMark{cpu: cpu, ok: true, wall: t0.Add(wall)}
	}
	cores := runtime.GOMAXPROCS(0)
	busy := time.Duration(float64(time.Second) * 0.95 * float64(cores)) // 95% of every core for 1 s
	ms := time.Millisecond
	tests := []struct {
		name    string
		o       Options
		lag     time.Duration
		held    time.Duration // between start and the socket
		latency float64       // s
		cpu     time.Duration
		bound   bool
		reason  string
	}{
		{"healthy", Options{RequestRate: 100}, ms / 10, 0, 0.2, 10 * ms, false, ""},
		{"late sends at 100/s", Options{RequestRate: 100}, 30 * ms, 0, 0.2, 10 * ms, true, "schedule lag p99 30.0 ms > 10.0 ms"},
		{"the same lag at 1/s is noise", Options{RequestRate: 1}, 30 * ms, 0, 0.2, 10 * ms, false, ""},
		{"late under a cap, short requests", Options{RequestRate: result.Inf, MaxConcurrency: 8}, 30 * ms, 0, 0.2, 0, true, "concurrency slots idled 15.0% of the time"},
		{"late under a cap, long requests", Options{RequestRate: result.Inf, MaxConcurrency: 8}, 30 * ms, 0, 2, 0, false, ""},
		{"a burst is not late", Options{RequestRate: result.Inf}, 300 * ms, 0, 0.2, 0, false, ""},
		{"saturated CPU", Options{RequestRate: 100}, 0, 0, 0.2, busy, true, "client CPU 95%"},
		{"CPU shared with --sim", Options{RequestRate: 100, CPUShared: true}, 0, 0, 0.2, busy, false, ""},
		{"own floor", Options{RequestRate: 100, MaxScheduleLag: 50 * ms}, 30 * ms, 0, 0.2, 0, false, ""},
		{"started on time, reached the socket late", Options{RequestRate: 100}, 0, 30 * ms, 0.2, 0, true, "schedule lag p99 30.0 ms > 10.0 ms"},
	}
	for _, tt := range tests {
		c := selfCheck(recs(tt.lag, tt.held, tt.latency), &tt.o, mark(0, 0), mark(tt.cpu, time.Second), nil)
		if c.ClientBound != tt.bound || !strings.Contains(c.Reason, tt.reason) {
			t.Errorf("%s: client_bound %v reason %q; want %v, %q", tt.name, c.ClientBound, c.Reason, tt.bound, tt.reason)
		}
		if tt.name == "healthy" && (c.ScheduleLagP99MS > 0.11 || c.AchievedRate < 99 || c.AchievedRate > 101 || c.Cores != cores) {
			t.Errorf("healthy: %+v", c)
		}
	}
}

// A client starved of CPU (one usable core, two goroutines spinning on
// it) is flagged: its numbers are the client's, not the engine's.
func TestStarvedClientFlagged(t *testing.T) {
	if testing.Short() {
		t.Skip("spins a core for a second")
	}
	f := &fakeVLLM{usage: true}
	url := f.start(t)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	stop := make(chan struct{})
	defer close(stop)
	for range 2 {
		go func() {
			x := 1.0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 100_000 {
					x = x*1.0000001 + float64(i&1)
				}
			}
		}()
	}
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 40, InputLen: 4, OutputLen: 4, RequestRate: 40})
	if err != nil {
		t.Fatal(err)
	}
	// Which sign shows depends on the machine: with the core to itself
	// the process's CPU is saturated; on a machine whose other tenants
	// take the core too, the sends come late.
	c := r.Perfgate.Client
	if !c.ClientBound || !(strings.Contains(c.Reason, "client CPU") || strings.Contains(c.Reason, "requests left late")) || c.Cores != 1 {
		t.Errorf("starved client not flagged: %+v", c)
	}
	t.Logf("starved: %+v", *c)
}

// An idle client at a modest rate is not.
func TestHealthyClientNotFlagged(t *testing.T) {
	f := &fakeVLLM{usage: true}
	url := f.start(t)
	r, err := Run(context.Background(), Options{Target: url, NumPrompts: 20, InputLen: 4, OutputLen: 4, RequestRate: 50,
		MaxScheduleLag: 200 * time.Millisecond}) // a shared CI machine's timers can be late by more than the default
	if err != nil {
		t.Fatal(err)
	}
	c := r.Perfgate.Client
	if c.ClientBound || c.CPUUtilization <= 0 || c.AchievedRate <= 0 {
		t.Errorf("healthy client: %+v", c)
	}
}
