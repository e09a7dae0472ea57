// Package gpu reads NVIDIA GPU telemetry through NVML (github.com/NVIDIA/go-nvml)
// behind a small interface, samples it during a measured run, and decides
// whether the run is trustworthy: a throttled card, another process on the GPU
// or a memory error makes a benchmark number meaningless.
//
// NVML needs cgo, the nvml build tag and a driver. A build without them
// (the default: `go build -tags nvml` with cgo makes an agent with
// telemetry), or a host without libnvidia-ml.so.1, gets ErrUnavailable
// from OpenNVML; runs are then recorded
// with telemetry marked unavailable, never a crash. Tests and
// `perfgate agent --fake-gpu` use Fake.
package gpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// ErrUnavailable means there is no NVML telemetry on this host or build. The
// wrapping error says why.
var ErrUnavailable = errors.New("NVML telemetry unavailable")

// Clock-event (throttle) reason bits of nvmlDeviceGetCurrentClocksEventReasons.
const (
	EventGPUIdle           uint64 = 0x1
	EventAppClocksSetting  uint64 = 0x2
	EventSWPowerCap        uint64 = 0x4  // normal at TDP under load: warning only
	EventHWSlowdown        uint64 = 0x8  // invalidates a run
	EventSyncBoost         uint64 = 0x10 // clocks held to a sync-boost group
	EventSWThermalSlowdown uint64 = 0x20 // invalidates a run in >1% of samples
	EventHWThermalSlowdown uint64 = 0x40 // invalidates a run
	EventHWPowerBrake      uint64 = 0x80 // invalidates a run
)

// Device is one physical card.
type Device interface {
	// Info is the card's identity and configuration, recorded in a result's
	// environment and compared before and after a run.
	Info(ctx context.Context) (Info, error)
	// Sample reads the card's current telemetry.
	Sample(ctx context.Context) (Sample, error)
}

// Provider opens cards by UUID, never by index: indexes change with
// CUDA_VISIBLE_DEVICES and PCI enumeration order, UUIDs do not.
type Provider interface {
	Open(uuid string) (Device, error)
	List() ([]Info, error)
	Close() error
}

// Info is what identifies a card and how it is configured.
type Info struct {
	UUID        string  `json:"uuid"`
	Serial      string  `json:"serial,omitempty"`
	Name        string  `json:"name,omitempty"`
	PCIBusID    string  `json:"pci_bus_id,omitempty"`
	Driver      string  `json:"driver_version,omitempty"`
	CUDA        string  `json:"cuda_version,omitempty"` // "12.4"
	PowerLimitW float64 `json:"power_limit_w,omitempty"`
	// MemoryMiB is the card's total memory (what a runner's mem-NNgb label
	// is made from).
	MemoryMiB int `json:"memory_mib,omitempty"`
	// SMClockMHz and MemClockMHz are the configured (applications) clocks,
	// or the maximum clocks where applications clocks are not supported: the
	// clocks the card is set to run at, not what it happens to run at now.
	SMClockMHz  int    `json:"sm_clock_mhz,omitempty"`
	MemClockMHz int    `json:"mem_clock_mhz,omitempty"`
	ECCMode     string `json:"ecc_mode,omitempty"`         // "enabled", "disabled", "unsupported"
	MIGMode     string `json:"mig_mode,omitempty"`         // "enabled", "disabled", "unsupported"
	Persistence string `json:"persistence_mode,omitempty"` // "enabled", "disabled", "unsupported"
	// SlowdownTempC is the temperature at which the card starts slowing
	// itself down; 0 when unknown.
	SlowdownTempC int `json:"slowdown_temp_c,omitempty"`
	// Simulated marks a scripted card (Fake): no GPU ran anything, and
	// what a reader sees says so instead of naming a model.
	Simulated bool `json:"simulated,omitempty"`
}

// ApplyTo records the card in a result's environment.
func (i Info) ApplyTo(env *result.Environment) {
	env.GPUName = i.Name
	env.GPUUUID = i.UUID
	env.GPUSerial = i.Serial
	env.GPUCount = 1
	env.Driver = i.Driver
	env.CUDA = i.CUDA
	env.PowerLimitW = i.PowerLimitW
	env.SMClockMHz = i.SMClockMHz
	env.MemClockMHz = i.MemClockMHz
	env.ECCMode = i.ECCMode
	env.MIGMode = i.MIGMode
	env.Persistence = i.Persistence
	env.FakeGPU = i.Simulated
}

// Sample is one reading of a card's telemetry. Counters (ECC, energy) are
// cumulative; the summary uses their change over the run.
type Sample struct {
	UtilPct     float64 `json:"util_pct"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	PowerW      float64 `json:"power_w"`
	PowerLimitW float64 `json:"power_limit_w"`
	SMClockMHz  float64 `json:"sm_clock_mhz"`
	MemClockMHz float64 `json:"mem_clock_mhz"`
	TempC       float64 `json:"temp_c"`
	// ClockEvents is the clock-event (throttle) reason bitmask; see Event*.
	ClockEvents    uint64 `json:"clock_events"`
	ECCCorrected   uint64 `json:"ecc_corrected"`   // volatile count since driver load
	ECCUncorrected uint64 `json:"ecc_uncorrected"` // volatile count since driver load
	RemapPending   bool   `json:"remap_pending,omitempty"`
	RemapFailed    bool   `json:"remap_failed,omitempty"`
	// PIDs are the compute processes on the card, as host PIDs.
	PIDs     []uint32 `json:"pids,omitempty"`
	EnergyMJ uint64   `json:"energy_mj"` // cumulative; 0 when unsupported
}

// UnavailableDevice is a Device whose every call fails with err (wrapped in
// ErrUnavailable if it is not already), so a caller without telemetry can
// hand it to a Sampler and get a summary marked unavailable.
func UnavailableDevice(err error) Device {
	switch {
	case err == nil:
		err = ErrUnavailable
	case !errors.Is(err, ErrUnavailable):
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return unavailable{err}
}

type unavailable struct{ err error }

func (u unavailable) Info(context.Context) (Info, error)     { return Info{}, u.err }
func (u unavailable) Sample(context.Context) (Sample, error) { return Sample{}, u.err }
