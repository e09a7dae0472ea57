package config

import "fmt"

// maxPairs bounds an interleaved job: 2×pairs engine runs in one job.
const maxPairs = 64

// validateTierPolicy checks the keys that say how a tier's evidence is
// gathered and judged: interleaving, the regression rule, the session
// noise assumed, and what an inconclusive verdict does to the check.
func (d *decoder) validateTierPolicy(f string, t Tier) {
	if t.Pairs < 3 || t.Pairs > maxPairs {
		d.errField(f+".pairs", fmt.Sprintf("pairs %d out of range", t.Pairs),
			fmt.Sprintf("3 to %d base/head pairs per interleaved job; the merge default is 8", maxPairs))
	}
	if t.SessionNoise < 0 || t.SessionNoise >= 0.5 {
		d.errField(f+".session_noise", fmt.Sprintf("session_noise %s out of range", t.SessionNoise),
			"0% to 50%: the session-to-session shift of your runner, e.g. 2%")
	}
	if t.SettleGPUMinutes < 0 || t.SettleGPUMinutes > 10000 {
		d.errField(f+".settle_gpu_minutes", fmt.Sprintf("settle_gpu_minutes %d out of range", t.SettleGPUMinutes),
			"0 (never add runs by itself) to 10000 GPU-minutes per pull request; the merge default is 150")
	}
	d.oneOf(f+".regression_at", t.RegressionAt, []string{RegressionAtThreshold, RegressionAtHalf})
	d.oneOf(f+".inconclusive", t.Inconclusive, []string{InconclusiveNeutral, InconclusiveNeedsAck})
	if t.Spending != "" {
		d.oneOf(f+".spending", t.Spending, []string{SpendingPocock, SpendingOBrienFleming})
	}
}

// moveListedMetrics lets a file gate a metric the defaults show as
// secondary (or demote a gated one) by listing it: the list the file wrote
// wins over the default one. A metric the file itself wrote in both lists
// stays in both, and validation says so.
func (d *decoder) moveListedMetrics(f string, t Tier) {
	for name := range t.Metrics {
		if _, both := t.Secondary[name]; !both {
			continue
		}
		gated, shown := d.set[f+".metrics."+name], d.set[f+".secondary."+name]
		switch {
		case gated && !shown:
			delete(t.Secondary, name)
		case shown && !gated:
			delete(t.Metrics, name)
		}
	}
}
