package gpu

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Thresholds of the validity rules.
const (
	// MaxSampleGap is the longest stretch without a sample before the run
	// counts as unobserved.
	MaxSampleGap = 5 * time.Second
	// MaxSWThermalFraction is the share of samples allowed to show software
	// thermal slowdown.
	MaxSWThermalFraction = 0.01
	// NearSlowdownC is how close to the slowdown threshold the hottest sample
	// may come before a warning.
	NearSlowdownC = 5
)

// Timed is a Sample and when it was taken.
type Timed struct {
	At time.Time
	Sample
}

// Run is everything observed over one measured run.
type Run struct {
	Before   Info // read at Start
	After    Info // read at Stop; zero UUID when that read failed
	Start    time.Time
	End      time.Time
	Interval time.Duration
	Samples  []Timed
	// Allow says whether a PID on the GPU belongs to the run (the engine's
	// own processes). Nil allows none.
	Allow func(pid uint32) bool
	// SampleErrors counts failed reads; FirstError is the first of them.
	SampleErrors int
	FirstError   string
}

// Summarize turns a run's samples into the result's GPU summary: mean, max
// and p95 per series, the energy used, and whether the run can be trusted.
func Summarize(r Run) result.GPUSummary {
	sum := result.GPUSummary{
		Available:  true,
		Samples:    len(r.Samples),
		IntervalMS: int(r.Interval / time.Millisecond),
		Series:     map[string]result.Aggregate{},
	}
	series := map[string]func(Sample) float64{
		"util_pct":      func(s Sample) float64 { return s.UtilPct },
		"mem_used_mib":  func(s Sample) float64 { return s.MemUsedMiB },
		"power_w":       func(s Sample) float64 { return s.PowerW },
		"sm_clock_mhz":  func(s Sample) float64 { return s.SMClockMHz },
		"mem_clock_mhz": func(s Sample) float64 { return s.MemClockMHz },
		"temp_c":        func(s Sample) float64 { return s.TempC },
	}
	if len(r.Samples) > 0 {
		for name, get := range series {
			vals := make([]float64, len(r.Samples))
			for i, s := range r.Samples {
				vals[i] = get(s.Sample)
			}
			sum.Series[name] = aggregate(vals)
		}
	}
	sum.EnergyJ = energyJ(r.Samples)
	sum.Invalid, sum.Warnings = judge(r)
	sum.Valid = len(sum.Invalid) == 0
	return sum
}

// judge applies the validity rules: which findings invalidate the run and
// which are only worth noting.
func judge(r Run) (invalid, warnings []string) {
	n := len(r.Samples)
	if n == 0 {
		invalid = append(invalid, "no GPU samples were taken during the run")
	}
	for _, rule := range []func(r Run, n int) (invalid, warnings []string){
		clockFindings, foreignFindings, memoryFindings, configFindings, temperatureFindings,
	} {
		inv, warn := rule(r, n)
		invalid = append(invalid, inv...)
		warnings = append(warnings, warn...)
	}

	// Gaps: the run must be observed from start to end.
	if gap, at := longestGap(r); gap > MaxSampleGap {
		invalid = append(invalid, fmt.Sprintf("no GPU sample for %s (at +%s; more than %s): telemetry missed part of the run", gap.Round(time.Millisecond), at.Round(time.Millisecond), MaxSampleGap))
	}
	if r.SampleErrors > 0 {
		warnings = append(warnings, fmt.Sprintf("%d GPU samples failed: %s", r.SampleErrors, r.FirstError))
	}
	return invalid, warnings
}

// clockFindings finds the card throttling itself (hardware slowdowns,
// too much software thermal slowdown) and a software power cap.
func clockFindings(r Run, n int) (invalid, warnings []string) {
	var hw = map[string]int{}
	var swThermal, swPower int
	for _, s := range r.Samples {
		ev := s.ClockEvents
		if ev&EventHWSlowdown != 0 {
			hw["hardware slowdown"]++
		}
		if ev&EventHWThermalSlowdown != 0 {
			hw["hardware thermal slowdown"]++
		}
		if ev&EventHWPowerBrake != 0 {
			hw["hardware power brake"]++
		}
		if ev&EventSWThermalSlowdown != 0 {
			swThermal++
		}
		if ev&EventSWPowerCap != 0 {
			swPower++
		}
	}
	for _, name := range sortedKeys(hw) {
		invalid = append(invalid, fmt.Sprintf("%s in %d of %d samples: the card throttled itself", name, hw[name], n))
	}
	if n > 0 && float64(swThermal) > MaxSWThermalFraction*float64(n) {
		invalid = append(invalid, fmt.Sprintf("software thermal slowdown in %d of %d samples (more than %.0f%%): the card ran too hot", swThermal, n, MaxSWThermalFraction*100))
	}
	if swPower > 0 {
		warnings = append(warnings, fmt.Sprintf("software power cap in %d of %d samples", swPower, n))
	}
	return invalid, warnings
}

// foreignFindings finds other processes on the GPU during the run.
func foreignFindings(r Run, n int) (invalid, warnings []string) {
	foreign := map[uint32]int{}
	for _, s := range r.Samples {
		for _, pid := range s.PIDs {
			if r.Allow == nil || !r.Allow(pid) {
				foreign[pid]++
			}
		}
	}
	if len(foreign) > 0 {
		pids := make([]uint32, 0, len(foreign))
		for pid := range foreign {
			pids = append(pids, pid)
		}
		sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
		parts := make([]string, len(pids))
		for i, pid := range pids {
			parts[i] = fmt.Sprintf("pid %d (%d of %d samples)", pid, foreign[pid], n)
		}
		invalid = append(invalid, "another process used the GPU during the run: "+strings.Join(parts, ", "))
	}
	return invalid, warnings
}

// memoryFindings finds new ECC errors and row remapping.
func memoryFindings(r Run, n int) (invalid, warnings []string) {
	if n > 0 {
		first, last := r.Samples[0].Sample, r.Samples[n-1].Sample
		if last.ECCUncorrected > first.ECCUncorrected {
			invalid = append(invalid, fmt.Sprintf("%d new uncorrected ECC errors during the run", last.ECCUncorrected-first.ECCUncorrected))
		}
		if last.ECCCorrected > first.ECCCorrected {
			warnings = append(warnings, fmt.Sprintf("%d new corrected ECC errors during the run", last.ECCCorrected-first.ECCCorrected))
		}
	}
	var pending, failed bool
	for _, s := range r.Samples {
		pending = pending || s.RemapPending
		failed = failed || s.RemapFailed
	}
	if failed {
		invalid = append(invalid, "GPU memory row remapping failed: the card needs service")
	} else if pending {
		invalid = append(invalid, "GPU memory row remapping is pending: reset the card before benchmarking")
	}
	return invalid, warnings
}

// configFindings finds the power limit or the card's configuration changing during the run.
func configFindings(r Run, n int) (invalid, warnings []string) {
	if lim := r.Before.PowerLimitW; lim > 0 {
		limits := make([]float64, 0, n+1)
		for _, s := range r.Samples {
			limits = append(limits, s.PowerLimitW)
		}
		limits = append(limits, r.After.PowerLimitW)
		for _, l := range limits {
			if l > 0 && l != lim {
				invalid = append(invalid, fmt.Sprintf("power limit changed during the run: %g W at start, %g W later", lim, l))
				break
			}
		}
	}
	if r.After.UUID != "" {
		invalid = append(invalid, configChanges(r.Before, r.After)...)
	}
	return invalid, warnings
}

// temperatureFindings finds a card that ran close to its slowdown temperature.
func temperatureFindings(r Run, n int) (invalid, warnings []string) {
	if r.Before.SlowdownTempC > 0 && n > 0 {
		var hottest float64
		for _, s := range r.Samples {
			hottest = math.Max(hottest, s.TempC)
		}
		if hottest >= float64(r.Before.SlowdownTempC-NearSlowdownC) {
			warnings = append(warnings, fmt.Sprintf("temperature reached %.0f C, within %d C of the slowdown threshold %d C", hottest, NearSlowdownC, r.Before.SlowdownTempC))
		}
	}
	return invalid, warnings
}

// configChanges lists what differs between the card before and after a run.
func configChanges(before, after Info) []string {
	var out []string
	check := func(what string, a, b any) {
		if a != b {
			out = append(out, fmt.Sprintf("%s changed during the run: %v at start, %v at end", what, a, b))
		}
	}
	check("GPU", before.UUID, after.UUID)
	check("SM clock setting (MHz)", before.SMClockMHz, after.SMClockMHz)
	check("memory clock setting (MHz)", before.MemClockMHz, after.MemClockMHz)
	check("ECC mode", before.ECCMode, after.ECCMode)
	check("MIG mode", before.MIGMode, after.MIGMode)
	check("persistence mode", before.Persistence, after.Persistence)
	return out
}

// longestGap is the longest time without a sample between Start and End, and
// where it began relative to Start.
func longestGap(r Run) (gap, at time.Duration) {
	prev := r.Start
	consider := func(t time.Time) {
		if prev.IsZero() || t.IsZero() {
			prev = t
			return
		}
		if d := t.Sub(prev); d > gap {
			gap, at = d, prev.Sub(r.Start)
		}
		prev = t
	}
	for _, s := range r.Samples {
		consider(s.At)
	}
	consider(r.End)
	return gap, at
}

// energyJ is the energy used over the samples: the card's energy counter
// where it has one, else power integrated over time (trapezoids).
func energyJ(samples []Timed) float64 {
	if len(samples) < 2 {
		return 0
	}
	first, last := samples[0], samples[len(samples)-1]
	if first.EnergyMJ > 0 && last.EnergyMJ >= first.EnergyMJ {
		return float64(last.EnergyMJ-first.EnergyMJ) / 1000
	}
	var j float64
	for i := 1; i < len(samples); i++ {
		dt := samples[i].At.Sub(samples[i-1].At).Seconds()
		j += (samples[i].PowerW + samples[i-1].PowerW) / 2 * dt
	}
	return j
}

// aggregate is the mean, max and p95 of vals; p95 interpolates linearly
// between ranks, as numpy.percentile (and so vLLM) does.
func aggregate(vals []float64) result.Aggregate {
	sorted := append([]float64(nil), vals...)
	sort.Float64s(sorted)
	var total float64
	for _, v := range sorted {
		total += v
	}
	return result.Aggregate{
		Mean: total / float64(len(sorted)),
		Max:  sorted[len(sorted)-1],
		P95:  percentile(sorted, 95),
	}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	frac := rank - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
