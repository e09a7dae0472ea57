//go:build linux && cgo && nvml

package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rs/zerolog"
)

// NVMLCompiledIn reports whether this binary has the NVML bindings (built
// with -tags nvml and cgo on Linux).
const NVMLCompiledIn = true

// OpenNVML loads libnvidia-ml and initialises NVML. On a host without the
// driver it returns an error wrapping ErrUnavailable and logs one line; the
// caller records runs without GPU metrics.
//
// Calling any NVML device function before a successful Init kills the
// process (an unresolved symbol, not a Go panic), so nothing below runs
// unless Init returned SUCCESS.
func OpenNVML(log zerolog.Logger) (Provider, error) {
	lib := nvml.New()
	ret := lib.Init()
	if ret != nvml.SUCCESS {
		var err error
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			err = fmt.Errorf("%w: libnvidia-ml.so.1 not found (no NVIDIA driver on this host): runs are recorded without GPU metrics", ErrUnavailable)
		case nvml.ERROR_DRIVER_NOT_LOADED:
			err = fmt.Errorf("%w: the NVIDIA kernel driver is not loaded: runs are recorded without GPU metrics", ErrUnavailable)
		case nvml.ERROR_NO_PERMISSION:
			err = fmt.Errorf("%w: no permission to open the NVIDIA driver (run the agent with access to /dev/nvidia*): runs are recorded without GPU metrics", ErrUnavailable)
		default:
			err = fmt.Errorf("%w: nvml init: %s: runs are recorded without GPU metrics", ErrUnavailable, errorString(ret))
		}
		// The caller logs err once; a second line here said it twice.
		log.Debug().Err(err).Msg("NVML init failed")
		return nil, err
	}
	p := &nvmlProvider{lib: lib, ext: lib.Extensions(), symbols: map[string]bool{}}
	driver, _ := p.lib.SystemGetDriverVersion()
	log.Info().Str("driver", driver).Msg("NVML telemetry available")
	return p, nil
}

type nvmlProvider struct {
	lib nvml.Interface
	ext nvml.ExtendedInterface

	mu      sync.Mutex
	symbols map[string]bool // LookupSymbol results: lookups take a lock in the library
	closed  bool
}

// has reports whether the loaded driver exports name. Functions newer than
// the driver are not in it, and calling one kills the process.
func (p *nvmlProvider) has(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok, seen := p.symbols[name]
	if !seen {
		ok = p.ext.LookupSymbol(name) == nil
		p.symbols[name] = ok
	}
	return ok
}

func (p *nvmlProvider) Open(uuid string) (Device, error) {
	if err := p.live(); err != nil {
		return nil, err
	}
	h, ret := p.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("open GPU %s: %s (list the cards with nvidia-smi -L)", uuid, errorString(ret))
	}
	return &nvmlDevice{p: p, h: h}, nil
}

func (p *nvmlProvider) List() ([]Info, error) {
	if err := p.live(); err != nil {
		return nil, err
	}
	n, ret := p.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %s", errorString(ret))
	}
	infos := make([]Info, 0, n)
	for i := 0; i < n; i++ {
		h, ret := p.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU index %d: %s", i, errorString(ret))
		}
		info, err := (&nvmlDevice{p: p, h: h}).Info(context.Background())
		if err != nil {
			return nil, fmt.Errorf("GPU index %d: %w", i, err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (p *nvmlProvider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if ret := p.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %s", errorString(ret))
	}
	return nil
}

func (p *nvmlProvider) live() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("nvml provider is closed")
	}
	return nil
}

type nvmlDevice struct {
	p *nvmlProvider
	h nvml.Device
}

func (d *nvmlDevice) Info(ctx context.Context) (Info, error) {
	if err := d.p.live(); err != nil {
		return Info{}, err
	}
	var info Info
	var ret nvml.Return
	if info.UUID, ret = d.h.GetUUID(); ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("GPU uuid: %s", errorString(ret))
	}
	info.Serial, _ = d.h.GetSerial() // not supported on consumer cards
	info.Name, _ = d.h.GetName()
	if pci, ret := d.h.GetPciInfo(); ret == nvml.SUCCESS {
		info.PCIBusID = cString(pci.BusId[:])
	}
	info.Driver, _ = d.p.lib.SystemGetDriverVersion()
	if d.p.has("nvmlSystemGetCudaDriverVersion_v2") {
		if v, ret := d.p.lib.SystemGetCudaDriverVersion_v2(); ret == nvml.SUCCESS {
			info.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
		}
	}
	if mw, ret := d.h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		info.PowerLimitW = float64(mw) / 1000
	}
	if m, ret := d.h.GetMemoryInfo(); ret == nvml.SUCCESS {
		info.MemoryMiB = int(m.Total >> 20)
	}
	info.SMClockMHz = d.configuredClock(nvml.CLOCK_SM)
	info.MemClockMHz = d.configuredClock(nvml.CLOCK_MEM)
	if cur, _, ret := d.h.GetEccMode(); ret == nvml.SUCCESS {
		info.ECCMode = enableState(cur)
	} else {
		info.ECCMode = "unsupported"
	}
	info.MIGMode = "unsupported"
	if d.p.has("nvmlDeviceGetMigMode") {
		if cur, _, ret := d.h.GetMigMode(); ret == nvml.SUCCESS {
			info.MIGMode = "disabled"
			if cur == nvml.DEVICE_MIG_ENABLE {
				info.MIGMode = "enabled"
			}
		}
	}
	if st, ret := d.h.GetPersistenceMode(); ret == nvml.SUCCESS {
		info.Persistence = enableState(st)
	} else {
		info.Persistence = "unsupported"
	}
	if t, ret := d.h.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); ret == nvml.SUCCESS {
		info.SlowdownTempC = int(t)
	}
	return info, nil
}

// configuredClock is the applications clock, or the maximum clock where
// applications clocks are not supported.
func (d *nvmlDevice) configuredClock(t nvml.ClockType) int {
	if v, ret := d.h.GetApplicationsClock(t); ret == nvml.SUCCESS && v > 0 {
		return int(v)
	}
	if v, ret := d.h.GetMaxClockInfo(t); ret == nvml.SUCCESS {
		return int(v)
	}
	return 0
}

func (d *nvmlDevice) Sample(ctx context.Context) (Sample, error) {
	if err := d.p.live(); err != nil {
		return Sample{}, err
	}
	var s Sample
	// The core readings must work on any supported card; a failure there is
	// a broken sample. NOT_SUPPORTED leaves the field zero.
	util, ret := d.h.GetUtilizationRates()
	if err := need("utilization", ret); err != nil {
		return Sample{}, err
	}
	s.UtilPct = float64(util.Gpu)
	if d.p.has("nvmlDeviceGetMemoryInfo_v2") {
		m, ret := d.h.GetMemoryInfo_v2()
		if err := need("memory", ret); err != nil {
			return Sample{}, err
		}
		s.MemUsedMiB = float64(m.Used) / (1 << 20)
	} else {
		m, ret := d.h.GetMemoryInfo()
		if err := need("memory", ret); err != nil {
			return Sample{}, err
		}
		s.MemUsedMiB = float64(m.Used) / (1 << 20)
	}
	mw, ret := d.h.GetPowerUsage()
	if err := need("power", ret); err != nil {
		return Sample{}, err
	}
	s.PowerW = float64(mw) / 1000
	if mw, ret := d.h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		s.PowerLimitW = float64(mw) / 1000
	}
	sm, ret := d.h.GetClockInfo(nvml.CLOCK_SM)
	if err := need("SM clock", ret); err != nil {
		return Sample{}, err
	}
	s.SMClockMHz = float64(sm)
	mem, ret := d.h.GetClockInfo(nvml.CLOCK_MEM)
	if err := need("memory clock", ret); err != nil {
		return Sample{}, err
	}
	s.MemClockMHz = float64(mem)
	temp, ret := d.h.GetTemperature(nvml.TEMPERATURE_GPU)
	if err := need("temperature", ret); err != nil {
		return Sample{}, err
	}
	s.TempC = float64(temp)
	// Drivers before R535 only have the older name of the same call.
	switch {
	case d.p.has("nvmlDeviceGetCurrentClocksEventReasons"):
		s.ClockEvents, _ = d.h.GetCurrentClocksEventReasons()
	case d.p.has("nvmlDeviceGetCurrentClocksThrottleReasons"):
		s.ClockEvents, _ = d.h.GetCurrentClocksThrottleReasons()
	}
	s.ECCCorrected, _ = d.h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	s.ECCUncorrected, _ = d.h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if d.p.has("nvmlDeviceGetRemappedRows") {
		if _, _, pending, failed, ret := d.h.GetRemappedRows(); ret == nvml.SUCCESS {
			s.RemapPending, s.RemapFailed = pending, failed
		}
	}
	procs, ret := d.h.GetComputeRunningProcesses()
	if err := need("compute processes", ret); err != nil {
		return Sample{}, err
	}
	for _, p := range procs {
		s.PIDs = append(s.PIDs, p.Pid)
	}
	if d.p.has("nvmlDeviceGetTotalEnergyConsumption") {
		s.EnergyMJ, _ = d.h.GetTotalEnergyConsumption()
	}
	return s, nil
}

// need turns a failed core reading into an error; NOT_SUPPORTED is not one.
func need(what string, ret nvml.Return) error {
	if ret == nvml.SUCCESS || ret == nvml.ERROR_NOT_SUPPORTED {
		return nil
	}
	return fmt.Errorf("read GPU %s: %s", what, errorString(ret))
}

func enableState(s nvml.EnableState) string {
	if s == nvml.FEATURE_ENABLED {
		return "enabled"
	}
	return "disabled"
}

func errorString(ret nvml.Return) string {
	return ret.Error()
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
