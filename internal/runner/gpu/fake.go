package gpu

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Fake is a scripted card for tests and `perfgate agent --fake-gpu`: a
// healthy, busy H100 unless a knob says otherwise. Safe for concurrent use.
type Fake struct {
	mu        sync.Mutex
	info      Info
	base      Sample
	script    func(n int, s *Sample)
	infoErr   error
	sampleErr error
	n         int
	failed    int // samples refused with sampleErr
	last      time.Time
}

// NewFake returns a healthy card with the given UUID.
func NewFake(uuid string) *Fake {
	return &Fake{
		info: Info{
			UUID: uuid, Serial: "1650000000000", Name: "NVIDIA H100 80GB HBM3 (fake)",
			PCIBusID: "00000000:01:00.0", Driver: "550.54.15", CUDA: "12.4",
			PowerLimitW: 700, MemoryMiB: 81559, SMClockMHz: 1980, MemClockMHz: 2619,
			ECCMode: "enabled", MIGMode: "disabled", Persistence: "enabled",
			SlowdownTempC: 87, Simulated: true,
		},
		base: Sample{
			UtilPct: 97, MemUsedMiB: 71000, PowerW: 420, PowerLimitW: 700,
			SMClockMHz: 1980, MemClockMHz: 2619, TempC: 52,
		},
	}
}

// Info implements Device.
func (f *Fake) Info(context.Context) (Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info, f.infoErr
}

// Sample implements Device: the base sample with a little deterministic
// variation, then the script.
func (f *Fake) Sample(context.Context) (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sampleErr != nil {
		f.failed++
		return Sample{}, f.sampleErr
	}
	s := f.base
	s.PIDs = append([]uint32(nil), f.base.PIDs...)
	s.UtilPct -= float64(f.n % 3)
	s.PowerW += float64(f.n%5) * 4
	if f.script != nil {
		f.script(f.n, &s)
	}
	now := time.Now()
	if !f.last.IsZero() {
		f.base.EnergyMJ += uint64(s.PowerW * float64(now.Sub(f.last).Milliseconds()))
	} else if f.base.EnergyMJ == 0 {
		f.base.EnergyMJ = 1_000_000 // a counter that has been running since boot
	}
	f.last = now
	s.EnergyMJ = f.base.EnergyMJ
	f.n++
	return s, nil
}

// Samples is how many samples were taken.
func (f *Fake) Samples() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// FailedSamples is how many samples Sample refused with the error set by
// Fail: a test waits for one instead of sleeping.
func (f *Fake) FailedSamples() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Script sets a function that edits sample n (counting from 0) before it is
// returned, for effects that come and go.
func (f *Fake) Script(fn func(n int, s *Sample)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = fn
}

// SetInfo edits the card's configuration.
func (f *Fake) SetInfo(fn func(*Info)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.info)
}

// Throttle sets the clock-event bits of every later sample (0 clears them).
func (f *Fake) Throttle(bits uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base.ClockEvents = bits
}

// AddProcess puts a process on the card from the next sample on.
func (f *Fake) AddProcess(pid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base.PIDs = append(f.base.PIDs, pid)
	sort.Slice(f.base.PIDs, func(i, j int) bool { return f.base.PIDs[i] < f.base.PIDs[j] })
}

// AddECC adds memory errors to the card's counters.
func (f *Fake) AddECC(corrected, uncorrected uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base.ECCCorrected += corrected
	f.base.ECCUncorrected += uncorrected
}

// SetPowerLimit changes the enforced power limit, as `nvidia-smi -pl` would.
func (f *Fake) SetPowerLimit(w float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info.PowerLimitW = w
	f.base.PowerLimitW = w
}

// SetTemp sets the temperature of every later sample.
func (f *Fake) SetTemp(c float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base.TempC = c
}

// Fail makes Info and Sample fail with the given errors (nil: succeed).
func (f *Fake) Fail(infoErr, sampleErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.infoErr, f.sampleErr = infoErr, sampleErr
}

// FakeProvider serves Fake cards by UUID.
type FakeProvider struct {
	devs []*Fake
}

// NewFakeProvider returns a provider of the given cards; with none, one
// card "GPU-00000000-fake-0000-0000-000000000000".
func NewFakeProvider(devs ...*Fake) *FakeProvider {
	if len(devs) == 0 {
		devs = []*Fake{NewFake("GPU-00000000-fake-0000-0000-000000000000")}
	}
	return &FakeProvider{devs: devs}
}

// Open implements Provider.
func (p *FakeProvider) Open(uuid string) (Device, error) {
	for _, d := range p.devs {
		if i, _ := d.Info(context.Background()); i.UUID == uuid {
			return d, nil
		}
	}
	return nil, fmt.Errorf("open GPU %s: no such fake GPU", uuid)
}

// List implements Provider.
func (p *FakeProvider) List() ([]Info, error) {
	out := make([]Info, 0, len(p.devs))
	for _, d := range p.devs {
		i, err := d.Info(context.Background())
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, nil
}

// Close implements Provider.
func (p *FakeProvider) Close() error { return nil }
