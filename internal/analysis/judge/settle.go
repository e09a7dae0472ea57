package judge

import (
	"fmt"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Settle is what an inconclusive verdict may still spend: the check's jobs
// as the settle budget counts them (the tier's settle_gpu_minutes is the
// budget).
type Settle struct {
	Jobs []JobTime
}

// JobTime is one job of a check as the settle budget counts it.
type JobTime struct {
	// Runs is the measured runs the job planned (2 a pair when
	// interleaved).
	Runs        int
	Interleaved bool
	// Minutes is the job's time on the card; 0 when unknown.
	Minutes float64
	// Added: the job was added to settle the check (it spends the budget).
	Added bool
}

// DefaultRunMinutes prices a run when the jobs' times say nothing.
const DefaultRunMinutes = 1.0

// settling is the settle budget in GPU-minutes per pull request, what the
// added jobs of this check spent of it, and what one more measured run
// costs on this card (the jobs' time on the card per run; a minute when
// unknown).
type settling struct {
	budget, spent, perRun float64
	interleaved           bool
}

func (s Settle) spend(tier config.Tier) settling {
	b := settling{budget: float64(tier.SettleGPUMinutes)}
	var minutes, runs float64
	for _, j := range s.Jobs {
		n := float64(j.Runs)
		if j.Interleaved {
			b.interleaved = true
		}
		d := j.Minutes
		if d > 0 {
			minutes += d
			runs += n
		}
		if j.Added {
			if d <= 0 {
				d = n * DefaultRunMinutes
			}
			b.spent += d
		}
	}
	b.perRun = DefaultRunMinutes
	if minutes > 0 && runs > 0 {
		b.perRun = minutes / runs
	}
	return b
}

// cost is the GPU-minutes of more candidate runs (pairs, when interleaved).
func (b settling) cost(more int) float64 {
	if b.interleaved {
		return b.perRun * float64(2*more)
	}
	return b.perRun * float64(more)
}

// fits reports whether adding more runs (pairs) stays within the budget.
func (b settling) fits(more int) bool { return b.budget > 0 && b.spent+b.cost(more) <= b.budget }

// last reports whether the look at n runs (pairs) is the last the budget
// pays for: the doubling after it would not fit. A tier without a settle
// budget keeps its plan's looks for retests.
func (b settling) last(n int) bool { return b.budget > 0 && !b.fits(n) }

// note says what settling spent and, when the verdict is still open, what
// would settle it.
func (b settling) note(rep *gate.Report, env *result.Environment) []string {
	if b.budget <= 0 || rep.Verdict != gate.Inconclusive {
		return nil
	}
	unit, n := "runs", rep.CandidateRuns
	if b.interleaved {
		unit = "pairs"
	}
	mins := MinutesOf(env)
	out := []string{fmt.Sprintf("settling spent %.0f of %.0f %s (settle_gpu_minutes) on added %s; %d more %s (about %.0f %s) would narrow the interval by √2 — a maintainer decides: `/perf ack` to accept, or raise settle_gpu_minutes",
		b.spent, b.budget, mins, unit, n, unit, b.cost(n), mins)}
	if need := rep.RunsToResolve(); need > n {
		// What the noise asks for, against what the budget can buy.
		out = append(out, fmt.Sprintf("at this noise a change of the threshold's size needs about %d %s in all: about %.0f %s more, where the settle budget has %.0f left",
			need, unit, b.cost(need-n), mins, max(b.budget-b.spent, 0)))
	}
	return out
}

// MinutesOf names the runner's time the way its runs used it: a runner
// with no real card (the simulated engine, a --fake-gpu runner, none at
// all) spends CPU-minutes, not GPU-minutes.
func MinutesOf(env *result.Environment) string {
	if env == nil || env.Sim || env.FakeGPU || env.GPUUUID == "" {
		return "CPU-minutes"
	}
	return "GPU-minutes"
}
