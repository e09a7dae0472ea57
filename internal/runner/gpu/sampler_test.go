package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/poll"
)

func TestSamplerSamplesUntilStop(t *testing.T) {
	f := NewFake("GPU-a")
	s := NewSampler(f, SamplerConfig{Interval: 5 * time.Millisecond, Log: zerolog.Nop()})
	s.Start(context.Background())
	waitFor(t, func() bool { return f.Samples() >= 5 })
	sum := s.Stop()
	if !sum.Available || !sum.Valid {
		t.Fatalf("summary %+v: want available and valid", sum)
	}
	if sum.Samples < 5 || sum.IntervalMS != 5 {
		t.Fatalf("samples %d interval %d ms: want at least 5 samples at 5 ms", sum.Samples, sum.IntervalMS)
	}
	if len(sum.Series) != 6 || sum.Series["util_pct"].Max == 0 {
		t.Fatalf("series %v", sum.Series)
	}
	// Stopped means stopped: no sample after Stop, and Stop is idempotent.
	n := f.Samples()
	time.Sleep(20 * time.Millisecond)
	if f.Samples() != n {
		t.Fatalf("sampling went on after Stop: %d then %d samples", n, f.Samples())
	}
	if again := s.Stop(); again.Samples != sum.Samples {
		t.Fatalf("second Stop gave %d samples, first %d", again.Samples, sum.Samples)
	}
}

func TestSamplerCatchesMidRunFaults(t *testing.T) {
	tests := []struct {
		name   string
		inject func(f *Fake)
		want   string
	}{
		{"foreign process", func(f *Fake) { f.AddProcess(31337) }, "pid 31337"},
		{"hardware thermal", func(f *Fake) { f.Throttle(EventHWThermalSlowdown) }, "hardware thermal slowdown"},
		{"uncorrected ECC", func(f *Fake) { f.AddECC(0, 1) }, "1 new uncorrected ECC errors"},
		{"power limit", func(f *Fake) { f.SetPowerLimit(300) }, "power limit changed"},
		{"MIG mode at the end", func(f *Fake) { f.SetInfo(func(i *Info) { i.MIGMode = "enabled" }) }, "MIG mode changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake("GPU-a")
			s := NewSampler(f, SamplerConfig{Interval: 2 * time.Millisecond, Allow: AllowPIDs(7), Log: zerolog.Nop()})
			s.Start(context.Background())
			waitFor(t, func() bool { return f.Samples() >= 2 })
			tt.inject(f)
			sum := s.Stop()
			if sum.Valid || !containsSub(sum.Invalid, tt.want) {
				t.Fatalf("valid=%v invalid=%q: want %q", sum.Valid, sum.Invalid, tt.want)
			}
		})
	}
}

func TestSamplerWithoutTelemetry(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	reason := errors.New("libnvidia-ml.so.1 not found")
	for _, dev := range []Device{UnavailableDevice(reason), nil} {
		logs.Reset()
		s := NewSampler(dev, SamplerConfig{Interval: time.Millisecond, Log: log})
		s.Start(context.Background())
		time.Sleep(5 * time.Millisecond)
		sum := s.Stop()
		if sum.Available || !sum.Valid || sum.Samples != 0 {
			t.Fatalf("summary %+v: want unavailable, valid, no samples", sum)
		}
		if !strings.Contains(sum.Reason, "NVML telemetry unavailable") {
			t.Fatalf("reason %q does not say telemetry is unavailable", sum.Reason)
		}
		if dev != nil && !strings.Contains(sum.Reason, "libnvidia-ml.so.1 not found") {
			t.Fatalf("reason %q lost the cause", sum.Reason)
		}
		if lines := strings.Count(logs.String(), "\n"); lines != 1 || !strings.Contains(logs.String(), "without GPU metrics") {
			t.Fatalf("want one clear log line, got %d:\n%s", lines, logs.String())
		}
	}
}

func TestSamplerCountsFailedSamples(t *testing.T) {
	f := NewFake("GPU-a")
	s := NewSampler(f, SamplerConfig{Interval: 2 * time.Millisecond, Log: zerolog.Nop()})
	s.Start(context.Background())
	waitFor(t, func() bool { return f.Samples() >= 2 })
	f.Fail(nil, errors.New("GPU is lost"))
	waitFor(t, func() bool { return f.FailedSamples() >= 1 })
	f.Fail(nil, nil)
	sum := s.Stop()
	if !containsSub(sum.Warnings, "GPU samples failed: GPU is lost") {
		t.Fatalf("warnings %q: want the failed samples noted", sum.Warnings)
	}
}

func TestSamplerNotStarted(t *testing.T) {
	sum := NewSampler(NewFake("GPU-a"), SamplerConfig{}).Stop()
	if sum.Available || !sum.Valid || !strings.Contains(sum.Reason, "not started") {
		t.Fatalf("summary %+v", sum)
	}
}

// waitFor polls cond until it holds, within the test's deadline: the
// machine is shared, so a test waits for an event, never for a duration.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, "the sampler", cond)
}
