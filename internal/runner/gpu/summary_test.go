package gpu

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// fakeRun takes n samples of f, 200 ms apart on a synthetic clock, with
// edit applied to the card before sample i.
func fakeRun(t *testing.T, f *Fake, n int, edit func(i int, f *Fake)) Run {
	t.Helper()
	ctx := context.Background()
	before, err := f.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Run{Before: before, Start: start, Interval: 200 * time.Millisecond, Allow: AllowPIDs(100, 101)}
	for i := 0; i < n; i++ {
		if edit != nil {
			edit(i, f)
		}
		s, err := f.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.Samples = append(r.Samples, Timed{At: start.Add(time.Duration(i) * r.Interval), Sample: s})
	}
	r.End = start.Add(time.Duration(n) * r.Interval)
	if r.After, err = f.Info(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestValidityRules(t *testing.T) {
	const n = 200
	tests := []struct {
		name        string
		edit        func(i int, f *Fake)
		run         func(r *Run) // edits the observed run afterwards
		wantInvalid string       // substring of one Invalid entry; "" = valid
		wantWarning string       // substring of one Warnings entry
	}{
		{name: "healthy busy card"},
		{name: "engine's own processes are allowed",
			edit: func(i int, f *Fake) {
				if i == 0 {
					f.AddProcess(100)
					f.AddProcess(101)
				}
			}},
		{name: "hardware slowdown in one sample",
			edit:        func(i int, f *Fake) { f.Throttle(map[bool]uint64{true: EventHWSlowdown}[i == 50]) },
			wantInvalid: "hardware slowdown in 1 of 200 samples"},
		{name: "hardware thermal slowdown",
			edit:        func(i int, f *Fake) { f.Throttle(map[bool]uint64{true: EventHWThermalSlowdown}[i == 10]) },
			wantInvalid: "hardware thermal slowdown in 1 of 200"},
		{name: "hardware power brake",
			edit:        func(i int, f *Fake) { f.Throttle(map[bool]uint64{true: EventHWPowerBrake}[i == 199]) },
			wantInvalid: "hardware power brake in 1 of 200"},
		{name: "software thermal slowdown in 1% of samples is tolerated",
			edit: func(i int, f *Fake) { f.Throttle(map[bool]uint64{true: EventSWThermalSlowdown}[i < 2]) }},
		{name: "software thermal slowdown in more than 1% of samples",
			edit:        func(i int, f *Fake) { f.Throttle(map[bool]uint64{true: EventSWThermalSlowdown}[i < 3]) },
			wantInvalid: "software thermal slowdown in 3 of 200 samples"},
		{name: "software power cap is only a warning",
			edit:        func(i int, f *Fake) { f.Throttle(EventSWPowerCap | EventGPUIdle) },
			wantWarning: "software power cap in 200 of 200 samples"},
		{name: "foreign process",
			edit: func(i int, f *Fake) {
				if i == 120 {
					f.AddProcess(100)
					f.AddProcess(4242)
				}
			},
			wantInvalid: "another process used the GPU during the run: pid 4242 (80 of 200 samples)"},
		{name: "new uncorrected ECC errors",
			edit: func(i int, f *Fake) {
				if i == 100 {
					f.AddECC(0, 2)
				}
			},
			wantInvalid: "2 new uncorrected ECC errors"},
		{name: "uncorrected errors from before the run do not count",
			edit: func(i int, f *Fake) {
				if i == 0 {
					f.AddECC(0, 5)
				}
			}},
		{name: "new corrected ECC errors are a warning",
			edit: func(i int, f *Fake) {
				if i == 100 {
					f.AddECC(3, 0)
				}
			},
			wantWarning: "3 new corrected ECC errors"},
		{name: "pending row remap",
			edit: func(i int, f *Fake) {
				f.Script(func(n int, s *Sample) { s.RemapPending = n == 7 })
			},
			wantInvalid: "row remapping is pending"},
		{name: "power limit changed mid-run",
			edit: func(i int, f *Fake) {
				if i == 100 {
					f.SetPowerLimit(500)
				}
			},
			wantInvalid: "power limit changed during the run: 700 W at start, 500 W later"},
		{name: "power limit changed and restored mid-run",
			edit: func(i int, f *Fake) {
				switch i {
				case 100:
					f.SetPowerLimit(500)
				case 101:
					f.SetPowerLimit(700)
				}
			},
			wantInvalid: "power limit changed during the run"},
		{name: "clock setting changed",
			run:         func(r *Run) { r.After.SMClockMHz = 1410 },
			wantInvalid: "SM clock setting (MHz) changed during the run: 1980 at start, 1410 at end"},
		{name: "MIG mode changed",
			run:         func(r *Run) { r.After.MIGMode = "enabled" },
			wantInvalid: "MIG mode changed"},
		{name: "unknown configuration after the run is not a change",
			run: func(r *Run) { r.After = Info{} }},
		{name: "temperature near slowdown is a warning",
			edit:        func(i int, f *Fake) { f.SetTemp(83) },
			wantWarning: "temperature reached 83 C, within 5 C of the slowdown threshold 87 C"},
		{name: "temperature below the warning band",
			edit: func(i int, f *Fake) { f.SetTemp(81) }},
		{name: "sampling gap over 5 s",
			run: func(r *Run) {
				for i := 100; i < len(r.Samples); i++ {
					r.Samples[i].At = r.Samples[i].At.Add(6 * time.Second)
				}
				r.End = r.End.Add(6 * time.Second)
			},
			wantInvalid: "no GPU sample for 6.2s"},
		{name: "gap of 5 s is tolerated",
			run: func(r *Run) {
				for i := 100; i < len(r.Samples); i++ {
					r.Samples[i].At = r.Samples[i].At.Add(4800 * time.Millisecond)
				}
				r.End = r.End.Add(4800 * time.Millisecond)
			}},
		{name: "run outlives its last sample",
			run:         func(r *Run) { r.End = r.End.Add(10 * time.Second) },
			wantInvalid: "no GPU sample for 10.2s"},
		{name: "no samples",
			run:         func(r *Run) { r.Samples = nil; r.End = r.Start.Add(time.Second) },
			wantInvalid: "no GPU samples were taken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakeRun(t, NewFake("GPU-test"), n, tt.edit)
			if tt.run != nil {
				tt.run(&r)
			}
			sum := Summarize(r)
			if tt.wantInvalid == "" {
				if !sum.Valid || len(sum.Invalid) > 0 {
					t.Fatalf("want a valid run, got invalid: %q", sum.Invalid)
				}
			} else {
				if sum.Valid {
					t.Fatalf("want an invalid run (%q), got valid; warnings %q", tt.wantInvalid, sum.Warnings)
				}
				if !containsSub(sum.Invalid, tt.wantInvalid) {
					t.Fatalf("invalid reasons %q lack %q", sum.Invalid, tt.wantInvalid)
				}
			}
			if tt.wantWarning != "" && !containsSub(sum.Warnings, tt.wantWarning) {
				t.Fatalf("warnings %q lack %q", sum.Warnings, tt.wantWarning)
			}
			if tt.wantWarning == "" && len(sum.Warnings) > 0 {
				t.Fatalf("unexpected warnings %q", sum.Warnings)
			}
		})
	}
}

func TestSummaryMath(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Run
	r.Start, r.Interval = start, 100*time.Millisecond
	// util 1..100 in shuffled order; numpy.percentile(range(1,101), 95) = 95.05.
	for i := 0; i < 100; i++ {
		v := float64((i*37)%100 + 1)
		r.Samples = append(r.Samples, Timed{At: start.Add(time.Duration(i) * r.Interval), Sample: Sample{
			UtilPct: v, MemUsedMiB: 1000, PowerW: 100, SMClockMHz: 2 * v, MemClockMHz: 1593, TempC: 40 + v/10,
			EnergyMJ: 1_000_000 + uint64(i)*10_000,
		}})
	}
	r.End = start.Add(100 * r.Interval)
	sum := Summarize(r)
	want := map[string]result.Aggregate{
		"util_pct":      {Mean: 50.5, Max: 100, P95: 95.05},
		"mem_used_mib":  {Mean: 1000, Max: 1000, P95: 1000},
		"power_w":       {Mean: 100, Max: 100, P95: 100},
		"sm_clock_mhz":  {Mean: 101, Max: 200, P95: 190.1},
		"mem_clock_mhz": {Mean: 1593, Max: 1593, P95: 1593},
		"temp_c":        {Mean: 45.05, Max: 50, P95: 49.505},
	}
	if len(sum.Series) != len(want) {
		t.Fatalf("series %v, want keys of %v", sum.Series, want)
	}
	for k, w := range want {
		g := sum.Series[k]
		if !near(g.Mean, w.Mean) || !near(g.Max, w.Max) || !near(g.P95, w.P95) {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
	if sum.Samples != 100 || sum.IntervalMS != 100 || !sum.Available {
		t.Errorf("samples %d interval %d available %v", sum.Samples, sum.IntervalMS, sum.Available)
	}
	// Energy counter: 99 steps of 10 J.
	if !near(sum.EnergyJ, 990) {
		t.Errorf("energy from counter = %g J, want 990", sum.EnergyJ)
	}
	// Without a counter: 100 W over 9.9 s integrated.
	for i := range r.Samples {
		r.Samples[i].EnergyMJ = 0
	}
	if e := Summarize(r).EnergyJ; !near(e, 990) {
		t.Errorf("energy integrated from power = %g J, want 990", e)
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// BenchmarkSummarize is a ten-minute run at the default 200 ms interval.
func BenchmarkSummarize(b *testing.B) {
	f := NewFake("GPU-bench")
	start := time.Now()
	r := Run{Start: start, Interval: DefaultInterval, Allow: AllowPIDs(1)}
	for i := 0; i < 3000; i++ {
		s, _ := f.Sample(context.Background())
		r.Samples = append(r.Samples, Timed{At: start.Add(time.Duration(i) * DefaultInterval), Sample: s})
	}
	r.End = start.Add(3000 * DefaultInterval)
	b.ReportAllocs()
	for b.Loop() {
		Summarize(r)
	}
}
