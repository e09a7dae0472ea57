package gpu

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Idle temperature rules of the pre-flight check.
const (
	// IdleHeadroomC is how far below the slowdown threshold an idle card
	// must be: a card that starts warm throttles sooner under load.
	IdleHeadroomC = 20
	// MaxIdleTempC applies when the card does not report its threshold.
	MaxIdleTempC = 70
)

// Expect is what a card must look like before a run. Empty fields are not
// checked.
type Expect struct {
	UUID        string
	PowerLimitW float64
	ECCMode     string
	MIGMode     string
	Persistence string
	// Allow says which PIDs may already be on the card; nil allows none.
	Allow func(pid uint32) bool
}

// Preflight checks a card before a run and returns one error listing
// everything that is wrong, or nil. It returns Info so the caller can record
// the environment without a second read.
func Preflight(ctx context.Context, dev Device, want Expect) (Info, error) {
	info, err := dev.Info(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("pre-flight: read GPU: %w", err)
	}
	s, err := dev.Sample(ctx)
	if err != nil {
		return info, fmt.Errorf("pre-flight: sample GPU %s: %w", info.UUID, err)
	}
	var wrong []string
	if want.UUID != "" && info.UUID != want.UUID {
		wrong = append(wrong, fmt.Sprintf("GPU is %s, the job is pinned to %s", info.UUID, want.UUID))
	}
	if want.PowerLimitW > 0 && info.PowerLimitW != want.PowerLimitW {
		wrong = append(wrong, fmt.Sprintf("power limit is %g W, want %g W", info.PowerLimitW, want.PowerLimitW))
	}
	for _, m := range []struct{ what, got, want string }{
		{"ECC mode", info.ECCMode, want.ECCMode},
		{"MIG mode", info.MIGMode, want.MIGMode},
		{"persistence mode", info.Persistence, want.Persistence},
	} {
		if m.want != "" && m.got != m.want {
			wrong = append(wrong, fmt.Sprintf("%s is %q, want %q", m.what, m.got, m.want))
		}
	}
	var foreign []uint32
	for _, pid := range s.PIDs {
		if want.Allow == nil || !want.Allow(pid) {
			foreign = append(foreign, pid)
		}
	}
	if len(foreign) > 0 {
		sort.Slice(foreign, func(i, j int) bool { return foreign[i] < foreign[j] })
		wrong = append(wrong, fmt.Sprintf("other processes are on the GPU (pids %s): stop them or wait", joinPIDs(foreign)))
	}
	if info.SlowdownTempC > 0 {
		if limit := info.SlowdownTempC - IdleHeadroomC; s.TempC > float64(limit) {
			wrong = append(wrong, fmt.Sprintf("idle temperature %.0f C is within %d C of the slowdown threshold %d C: let the card cool down", s.TempC, IdleHeadroomC, info.SlowdownTempC))
		}
	} else if s.TempC > MaxIdleTempC {
		wrong = append(wrong, fmt.Sprintf("idle temperature %.0f C is above %d C: let the card cool down", s.TempC, MaxIdleTempC))
	}
	if s.RemapPending || s.RemapFailed {
		wrong = append(wrong, "GPU memory row remapping is pending or failed: reset or service the card")
	}
	if len(wrong) > 0 {
		return info, errors.New("pre-flight failed on GPU " + info.UUID + ": " + strings.Join(wrong, "; "))
	}
	return info, nil
}

func joinPIDs(pids []uint32) string {
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ", ")
}
